// One engine step over a CUDA model of fixed sequence slots (cuda::CudaModel, cuda::CudaV41Model:
// reset / position / prefill / decode): engine state slot i is device slot i, a sequence's first
// chunk resets its slot, prompt positions of a sequence run as one prefill (or, batched, the
// prompt pieces of all sequences of a round as one prefill_batch), generated positions
// (a recompute after preemption) one at a time as they first ran, and every single-token piece of
// a round goes into one batched decode. Shared by the V4 and V4.1 CUDA runners.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/sampling.h"
#include "common/result.h"
#include "engine/model_runner.h"

namespace deepinfer::engine {

// Scratch reused across steps: per sequence its next position and logits row (-1: none); one
// round's single-token pieces, their output rows and device sampling (mode 0: none).
struct SlotStepScratch {
  std::vector<int32_t> cursor;
  std::vector<int64_t> logits_row;
  std::vector<uint8_t> ran;  // this round
  std::vector<int> dec_slots;
  std::vector<int32_t> dec_ids;
  std::vector<int64_t> dec_rows;
  std::vector<cuda::SampleSpec> dec_specs;
  std::vector<float> dec_logits;
  std::vector<int32_t> dec_argmax;
  std::vector<int32_t> dec_tokens;
  // One round's prompt pieces of several tokens (batched prefill), their output rows.
  std::vector<int> pf_slots;
  std::vector<std::span<const int32_t>> pf_ids;
  std::vector<int64_t> pf_rows;
  std::vector<float> pf_logits;
};

// The device kernel's parameters for an engine DeviceSample (null: no token wanted), computed as
// the Sampler computes them (1 / temperature and log(min_p) in float).
inline cuda::SampleSpec device_spec(const DeviceSample* d) {
  cuda::SampleSpec s;
  if (!d) return s;
  s.mode = d->greedy ? 1 : 2;
  if (d->greedy) return s;
  s.inv_temperature = 1.0f / d->temperature;
  s.top_k = d->top_k > 0 ? d->top_k : 0;
  s.top_p = d->top_p;
  s.has_min_p = d->min_p > 0.0f;
  s.log_min_p = s.has_min_p ? std::log(d->min_p) : 0.0f;
  s.uniform = d->uniform;
  return s;
}
static_assert(cuda::kMaxDeviceTopK >= kDeviceSampleMaxTopK);

// A forward of B pieces whose last rows go to the engine's logits rows `rows` (-1: none):
// forward(dst) writes the B rows to dst, straight into the engine's rows when every piece wants
// them and they follow one another, else into `scratch` and copied from there; no_rows() runs
// instead when no piece wants its logits.
template <class Forward, class NoRows>
Status forward_into_rows(std::span<const int64_t> rows, int64_t V, std::vector<float>& scratch,
                         std::span<float> logits, Forward forward, NoRows no_rows) {
  const size_t B = rows.size();
  bool any = false, direct = rows[0] >= 0;
  for (size_t b = 0; b < B; ++b) {
    any |= rows[b] >= 0;
    direct = direct && rows[b] == rows[0] + static_cast<int64_t>(b);
  }
  if (!any) return no_rows();
  if (direct) return forward(logits.data() + rows[0] * V);
  scratch.resize(B * static_cast<size_t>(V));
  if (Status st = forward(scratch.data()); !st.ok()) return st;
  for (size_t b = 0; b < B; ++b)
    if (rows[b] >= 0) std::copy_n(scratch.data() + b * V, V, logits.data() + rows[b] * V);
  return Status::Ok();
}

// Models whose decode() also samples on the device (cuda::CudaModel).
template <class Model>
concept SamplesOnDevice = requires(Model& m, std::span<const int> seqs,
                                   std::span<const int32_t> ids,
                                   std::span<const cuda::SampleSpec> specs, int32_t* tokens) {
  m.decode(seqs, ids, nullptr, nullptr, specs, tokens);
};

template <class Model>
Status run_slot_decodes(Model& model, int64_t V, SlotStepScratch& s, std::span<float> logits,
                        std::span<int32_t> tokens) {
  const size_t B = s.dec_slots.size();
  if (B == 0) return Status::Ok();
  if constexpr (SamplesOnDevice<Model>) {
    bool sampled = false, rows = false;  // any row sampled on the device / wanting its logits
    for (size_t b = 0; b < B; ++b) {
      sampled |= s.dec_specs[b].mode != 0;
      rows |= s.dec_rows[b] >= 0 && s.dec_specs[b].mode == 0;
    }
    if (sampled) {
      s.dec_tokens.resize(B);
      if (rows) s.dec_logits.resize(B * static_cast<size_t>(V));
      if (Status st = model.decode(s.dec_slots, s.dec_ids, rows ? s.dec_logits.data() : nullptr,
                                   nullptr, s.dec_specs, s.dec_tokens.data());
          !st.ok())
        return st;
      for (size_t b = 0; b < B; ++b) {
        if (s.dec_rows[b] < 0) continue;
        if (s.dec_specs[b].mode != 0)
          tokens[static_cast<size_t>(s.dec_rows[b])] = s.dec_tokens[b];
        else
          std::copy_n(s.dec_logits.data() + b * V, V, logits.data() + s.dec_rows[b] * V);
      }
      return Status::Ok();
    }
  }
  return forward_into_rows(
      s.dec_rows, V, s.dec_logits, logits,
      [&](float* rows) { return model.decode(s.dec_slots, s.dec_ids, rows, nullptr); },
      [&] {  // recomputed positions only: the argmax copy-back waits for the step
        s.dec_argmax.resize(B);
        return model.decode(s.dec_slots, s.dec_ids, nullptr, s.dec_argmax.data());
      });
}

// Models that prefill several slots' prompt pieces in shared launches (cuda::CudaModel).
template <class Model>
concept PrefillsBatches = requires(Model& m, std::span<const int> seqs,
                                   std::span<const std::span<const int32_t>> prompts) {
  m.prefill_batch(seqs, prompts, nullptr);
};

// One round's prompt pieces (s.pf_*) through one prefill_batch: each piece's last row goes to its
// logits row (-1: none).
template <class Model>
Status run_slot_prefills(Model& model, int64_t V, SlotStepScratch& s, std::span<float> logits) {
  if (s.pf_slots.empty()) return Status::Ok();
  return forward_into_rows(
      s.pf_rows, V, s.pf_logits, logits,
      [&](float* rows) { return model.prefill_batch(s.pf_slots, s.pf_ids, rows); },
      [&] { return model.prefill_batch(s.pf_slots, s.pf_ids, nullptr); });
}

// Models whose entry stores are paged by the engine's blocks, with block snapshots
// (cuda::CudaModel).
template <class Model>
concept PagedSlots = requires(Model& m, std::span<const int32_t> table) {
  m.set_block_table(0, table);
  m.save_snapshot(0, 0);
  m.restore_snapshot(0, 0, 0);
};

// A paged model's step: its block size, and whether block snapshots are kept (prefix caching:
// prompt pieces then end at block boundaries, so that every forward covers the same positions
// whether a request hit the cache or not, and the state at each block end is saved).
struct SlotPaging {
  int32_t block_size = 0;  // 0: the model is not paged
  bool snapshots = false;
  // A round's prompt pieces of all sequences go through one prefill_batch (models that have it)
  // instead of one prefill each; snapshots are still taken after the round, at each block end.
  bool batch_prefill = false;
};

// tokens (empty, or one per logits row, set to -1 here): where a sequence has a device_sample and
// its last position runs in a decode, the token drawn on the device.
template <class Model>
Status run_slot_step(Model& model, int num_slots, int64_t max_context, int64_t V,
                     SlotStepScratch& s, std::span<const RunnerSequence> batch,
                     std::span<float> logits, std::span<int32_t> tokens = {},
                     const SlotPaging& paging = {}) {
  const int32_t bs = paging.block_size;
  const size_t n = batch.size();
  s.cursor.resize(n);
  s.logits_row.resize(n);
  int64_t row = 0;
  for (size_t i = 0; i < n; ++i) {
    const RunnerSequence& seq = batch[i];
    if (seq.slot < 0 || seq.slot >= num_slots)
      return Error{"cuda runner: bad state slot " + std::to_string(seq.slot)};
    for (size_t k = 0; k < i; ++k)
      if (batch[k].slot == seq.slot) return Error{"cuda runner: a step names a slot twice"};
    if (seq.fresh && seq.start == 0) model.reset(seq.slot);
    if (seq.fresh && seq.start != 0) {
      if (!paging.snapshots || seq.start % bs != 0 ||
          static_cast<int64_t>(seq.block_table.size()) < seq.start / bs)
        return Error{"cuda runner: a prefix hit needs a block snapshot (prefix caching is off)"};
      if constexpr (PagedSlots<Model>) {
        const int32_t block = seq.block_table[static_cast<size_t>(seq.start / bs - 1)];
        if (Status st = model.restore_snapshot(block, seq.slot, seq.start); !st.ok()) return st;
      }
    }
    if constexpr (PagedSlots<Model>) {
      if (bs > 0) {
        if (static_cast<int64_t>(seq.block_table.size()) * bs <
            seq.start + static_cast<int64_t>(seq.tokens.size()))
          return Error{"cuda runner: the block table does not cover the step"};
        if (Status st = model.set_block_table(seq.slot, seq.block_table); !st.ok()) return st;
      }
    }
    if (model.position(seq.slot) != seq.start)
      return Error{"cuda runner: slot " + std::to_string(seq.slot) + " is at position " +
                   std::to_string(model.position(seq.slot)) + ", the step starts at " +
                   std::to_string(seq.start)};
    if (seq.start + static_cast<int64_t>(seq.tokens.size()) > max_context)
      return Error{"cuda runner: the sequence would pass the slots' " +
                   std::to_string(max_context) + " positions"};
    s.cursor[i] = seq.start;
    s.logits_row[i] = seq.want_logits ? row++ : -1;
  }
  if (static_cast<int64_t>(logits.size()) < row * V)
    return Error{"cuda runner: the logits span is too small"};
  if (!tokens.empty() && static_cast<int64_t>(tokens.size()) < row)
    return Error{"cuda runner: the tokens span is too small"};
  std::fill(tokens.begin(), tokens.end(), -1);
  // Rounds: prompt positions in one prefill, generated positions (a recompute after preemption)
  // one at a time, as they first ran; every single-token piece of a round in one decode.
  for (;;) {
    s.dec_slots.clear();
    s.dec_ids.clear();
    s.dec_rows.clear();
    s.dec_specs.clear();
    s.pf_slots.clear();
    s.pf_ids.clear();
    s.pf_rows.clear();
    bool ran = false;
    s.ran.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
      const RunnerSequence& seq = batch[i];
      const int32_t p = s.cursor[i], end = seq.start + static_cast<int32_t>(seq.tokens.size());
      if (p >= end) continue;
      s.ran[i] = 1;
      int32_t piece_end = p < seq.num_prompt ? std::min(end, seq.num_prompt) : p + 1;
      if (paging.snapshots) piece_end = std::min(piece_end, (p / bs + 1) * bs);
      const bool want = piece_end == end && seq.want_logits;
      const auto ids = seq.tokens.subspan(static_cast<size_t>(p - seq.start),
                                          static_cast<size_t>(piece_end - p));
      s.cursor[i] = piece_end;
      ran = true;
      if (ids.size() == 1) {
        s.dec_slots.push_back(seq.slot);
        s.dec_ids.push_back(ids[0]);
        s.dec_rows.push_back(want ? s.logits_row[i] : -1);
        s.dec_specs.push_back(device_spec(want && !tokens.empty() ? seq.device_sample : nullptr));
        continue;
      }
      if constexpr (PrefillsBatches<Model>) {
        if (paging.batch_prefill) {
          s.pf_slots.push_back(seq.slot);
          s.pf_ids.push_back(ids);
          s.pf_rows.push_back(want ? s.logits_row[i] : -1);
          continue;
        }
      }
      const int64_t last = static_cast<int64_t>(ids.size()) - 1;
      if (Status st = model.prefill(
              seq.slot, ids, want ? std::span<const int64_t>(&last, 1) : std::span<const int64_t>(),
              want ? logits.data() + s.logits_row[i] * V : nullptr);
          !st.ok())
        return st;
    }
    if (!ran) break;
    if constexpr (PrefillsBatches<Model>) {
      if (Status st = run_slot_prefills(model, V, s, logits); !st.ok()) return st;
    }
    if (Status st = run_slot_decodes(model, V, s, logits, tokens); !st.ok()) return st;
    if constexpr (PagedSlots<Model>) {
      if (!paging.snapshots) continue;
      // Each sequence that reached a block end in this round: its state there, for later hits.
      for (size_t i = 0; i < n; ++i) {
        const int32_t p = s.cursor[i];
        if (!s.ran[i] || p % bs != 0) continue;
        const int32_t block = batch[i].block_table[static_cast<size_t>(p / bs - 1)];
        if (Status st = model.save_snapshot(batch[i].slot, block); !st.ok()) return st;
      }
    }
  }
  return Status::Ok();
}

}  // namespace deepinfer::engine
