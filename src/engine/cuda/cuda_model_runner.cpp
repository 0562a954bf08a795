// CudaModelRunner implementation.
#include "engine/cuda/cuda_model_runner.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace deepinfer::engine {

Result<CudaKvPlan> plan_cuda_kv(const model::ModelConfig& config, int64_t kv_cache_memory,
                                int32_t max_num_seqs, int32_t max_model_len, int32_t block_size) {
  if (max_num_seqs < 1 || block_size < 1 || max_model_len < 2)
    return Error{"cuda kv plan: max_num_seqs, block_size must be >= 1 and max_model_len >= 2"};
  const auto state = [&](int64_t ctx) {
    return int64_t{max_num_seqs} * cuda::cuda_slot_bytes(config, ctx).total();
  };
  int64_t ctx = max_model_len;
  if (kv_cache_memory > 0 && state(ctx) > kv_cache_memory) {
    // Slot bytes grow with the context: the largest fitting one by bisection.
    int64_t lo = 1, hi = ctx;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (state(mid) <= kv_cache_memory)
        lo = mid;
      else
        hi = mid - 1;
    }
    ctx = lo;
    if (ctx < 2 || state(ctx) > kv_cache_memory)
      return Error{"--kv-cache-memory " + std::to_string(kv_cache_memory) +
                   " bytes is too small for " + std::to_string(max_num_seqs) +
                   " CUDA sequence slots: one slot takes at least " +
                   std::to_string(cuda::cuda_slot_bytes(config, 2).total()) + " bytes"};
  }
  CudaKvPlan plan;
  plan.max_context = ctx;
  const int64_t blocks = int64_t{max_num_seqs} * ((ctx + block_size - 1) / block_size);
  plan.num_blocks = static_cast<int32_t>(std::min<int64_t>(blocks, INT32_MAX / 2));
  plan.slot_bytes = cuda::cuda_slot_bytes(config, ctx).total();
  plan.state_bytes = state(ctx);
  return plan;
}

CudaModelRunner::CudaModelRunner(const model::Model& cpu, const CudaRunnerOptions& options)
    : cpu_(&cpu), config_(cpu.config()), options_(options) {}

int64_t CudaModelRunner::bytes_per_block(int32_t block_size) const {
  const double per_pos = cuda::cuda_slot_bytes(config_, 1).entry_bytes_per_position;
  return static_cast<int64_t>(std::ceil(per_pos * block_size));
}

int64_t CudaModelRunner::bytes_per_slot() const {
  return cuda::cuda_slot_bytes(config_, 1).bounded;
}

Status CudaModelRunner::allocate(const KvCacheConfig& config) {
  if (model_) return Error{"cuda runner: allocate() called twice"};
  if (!cpu_) return Error{"cuda runner: no model"};
  cuda::CudaModelOptions o;
  o.max_sequences = std::max(1, config.num_state_slots);
  o.max_context = options_.max_context;
  o.max_chunk_tokens = options_.max_chunk_tokens;
  o.emulate = options_.emulate;
  o.cuda_graphs = options_.cuda_graphs;
  auto m = cuda::CudaModel::from_model(*cpu_, o);
  if (!m.ok()) return m.error();
  model_ = std::move(m.value());
  cpu_ = nullptr;  // the weights live on the device now
  num_slots_ = o.max_sequences;
  const size_t slots = static_cast<size_t>(o.max_sequences);
  dec_slots_.reserve(slots);
  dec_ids_.reserve(slots);
  dec_rows_.reserve(slots);
  dec_argmax_.reserve(slots);
  return Status::Ok();
}

Status CudaModelRunner::run_decodes(std::span<float> logits) {
  const size_t B = dec_slots_.size();
  if (B == 0) return Status::Ok();
  const int64_t V = config_.vocab_size;
  // Straight into the engine's rows when every piece wants logits and their rows follow one
  // another (a plain decode step); otherwise through scratch.
  bool direct = dec_rows_[0] >= 0;
  for (size_t b = 1; b < B && direct; ++b) direct = dec_rows_[b] == dec_rows_[0] + int64_t(b);
  if (direct)
    return model_->decode(dec_slots_, dec_ids_, logits.data() + dec_rows_[0] * V, nullptr);
  bool any = false;
  for (int64_t r : dec_rows_) any |= r >= 0;
  if (!any) {  // recomputed positions only: the argmax copy-back waits for the step
    dec_argmax_.resize(B);
    return model_->decode(dec_slots_, dec_ids_, nullptr, dec_argmax_.data());
  }
  dec_logits_.resize(B * static_cast<size_t>(V));
  if (Status s = model_->decode(dec_slots_, dec_ids_, dec_logits_.data(), nullptr); !s.ok())
    return s;
  for (size_t b = 0; b < B; ++b)
    if (dec_rows_[b] >= 0)
      std::copy_n(dec_logits_.data() + b * V, V, logits.data() + dec_rows_[b] * V);
  return Status::Ok();
}

Status CudaModelRunner::execute(std::span<const RunnerSequence> batch, std::span<float> logits) {
  if (!model_) return Error{"cuda runner: allocate() was not called"};
  const int64_t V = config_.vocab_size;
  const size_t n = batch.size();
  const int slots = num_slots_;
  cursor_.resize(n);
  logits_row_.resize(n);
  int64_t row = 0;
  for (size_t i = 0; i < n; ++i) {
    const RunnerSequence& seq = batch[i];
    if (seq.slot < 0 || seq.slot >= slots)
      return Error{"cuda runner: bad state slot " + std::to_string(seq.slot)};
    for (size_t k = 0; k < i; ++k)
      if (batch[k].slot == seq.slot) return Error{"cuda runner: a step names a slot twice"};
    if (seq.fresh) {
      if (seq.start != 0) return Error{"cuda runner: no prefix snapshots (prefix caching is off)"};
      model_->reset(seq.slot);
    }
    if (model_->position(seq.slot) != seq.start)
      return Error{"cuda runner: slot " + std::to_string(seq.slot) + " is at position " +
                   std::to_string(model_->position(seq.slot)) + ", the step starts at " +
                   std::to_string(seq.start)};
    if (seq.start + static_cast<int64_t>(seq.tokens.size()) > options_.max_context)
      return Error{"cuda runner: the sequence would pass the slots' " +
                   std::to_string(options_.max_context) + " positions"};
    cursor_[i] = seq.start;
    logits_row_[i] = seq.want_logits ? row++ : -1;
  }
  if (static_cast<int64_t>(logits.size()) < row * V)
    return Error{"cuda runner: the logits span is too small"};
  // Rounds: prompt positions in one prefill, generated positions (a recompute after preemption)
  // one at a time, as they first ran; every single-token piece of a round in one decode.
  for (;;) {
    dec_slots_.clear();
    dec_ids_.clear();
    dec_rows_.clear();
    bool ran = false;
    for (size_t i = 0; i < n; ++i) {
      const RunnerSequence& seq = batch[i];
      const int32_t p = cursor_[i], end = seq.start + static_cast<int32_t>(seq.tokens.size());
      if (p >= end) continue;
      const int32_t piece_end = p < seq.num_prompt ? std::min(end, seq.num_prompt) : p + 1;
      const bool want = piece_end == end && seq.want_logits;
      const auto ids = seq.tokens.subspan(static_cast<size_t>(p - seq.start),
                                          static_cast<size_t>(piece_end - p));
      cursor_[i] = piece_end;
      ran = true;
      if (ids.size() == 1) {
        dec_slots_.push_back(seq.slot);
        dec_ids_.push_back(ids[0]);
        dec_rows_.push_back(want ? logits_row_[i] : -1);
        continue;
      }
      const int64_t last = static_cast<int64_t>(ids.size()) - 1;
      if (Status s = model_->prefill(
              seq.slot, ids, want ? std::span<const int64_t>(&last, 1) : std::span<const int64_t>(),
              want ? logits.data() + logits_row_[i] * V : nullptr);
          !s.ok())
        return s;
    }
    if (!ran) break;
    if (Status s = run_decodes(logits); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace deepinfer::engine
