// V41ModelRunner implementation.
#include "engine/v41_model_runner.h"

#include <algorithm>
#include <limits>
#include <string>

#include "engine/v41_kv_layout.h"

namespace deepinfer::engine {
namespace {

using model::EntryFormat;
using model::EntryStore;
using model::v41::V41Config;
using model::v41::V41LayerState;
using model::v41::V41State;

// Bytes of one store's region inside a block: block_size / ratio rows, 8-byte aligned.
int64_t region_bytes(const EntryStore& s, int32_t block_size) {
  const int64_t rows = std::max(1, block_size / s.ratio);
  return (rows * s.row_bytes + 7) / 8 * 8;
}

}  // namespace

V41ModelRunner::V41ModelRunner(model::v41::V41Model& model, bool snapshots, bool pack_entries)
    : model_(model), snapshots_(snapshots), pack_(pack_entries) {
  const V41Config& c = model_.config();
  fresh_ = model_.new_state(pack_);
  for (V41LayerState& l : fresh_.layers)
    l.ring.assign(static_cast<size_t>(c.sliding_window) * static_cast<size_t>(c.head_dim), 0.0f);
  ring_row_bytes_ = model::entry_row_bytes(EntryFormat::Fp8B32, c.head_dim, 0);
}

int32_t V41ModelRunner::vocab_size() const { return model_.config().vocab_size; }

int64_t V41ModelRunner::entry_bytes_per_block(int32_t block_size) const {
  int64_t bytes = 0;
  for (const V41LayerState& l : fresh_.layers)
    for (const EntryStore* s : {&l.compressed, &l.index_keys})
      if (s->ratio > 0) bytes += region_bytes(*s, block_size);
  return bytes;
}

int64_t V41ModelRunner::bytes_per_slot() const {
  const V41KvBytes b = v41_kv_bytes_packed(model_.config());
  return b.ring_bytes_f32 + b.tail_bytes;
}

int64_t V41ModelRunner::bytes_per_block(int32_t block_size) const {
  return entry_bytes_per_block(block_size) + (snapshots_ ? v41_snapshot_bytes(model_.config()) : 0);
}

Status V41ModelRunner::allocate(const KvCacheConfig& config) {
  block_size_ = config.block_size;
  const int32_t bs = block_size_;
  if (bs < 1) return Error{"v41 runner: the KV block size must be >= 1"};
  for (int r : model_.config().compress_ratios)
    if (r > 0 && bs % r != 0)
      return Error{"v41 runner: the KV block size " + std::to_string(bs) +
                   " must be a multiple of every compress ratio (" + std::to_string(r) + ")"};
  const int64_t block_bytes = entry_bytes_per_block(bs);
  arena_.assign(static_cast<size_t>((int64_t{config.num_blocks} * block_bytes + 7) / 8), 0);
  auto* base = reinterpret_cast<uint8_t*>(arena_.data());
  int64_t offset = 0;
  for (V41LayerState& l : fresh_.layers) {
    for (EntryStore* s : {&l.compressed, &l.index_keys}) {
      if (s->ratio == 0) continue;
      s->pages = base + offset;
      s->page_stride = block_bytes;
      s->block_size = bs;
      offset += region_bytes(*s, bs);
    }
  }
  caching_ = config.prefix_caching && snapshots_;
  slots_.assign(static_cast<size_t>(config.num_state_slots), V41State{});
  snapshots_by_block_.assign(caching_ ? static_cast<size_t>(config.num_blocks) : 0, Snapshot{});
  return Status::Ok();
}

void V41ModelRunner::save(const V41State& state, Snapshot& snap) const {
  const V41Config& c = model_.config();
  const int D = c.head_dim, win = c.sliding_window;
  snap.position = state.position;
  snap.rings.resize(static_cast<size_t>(c.num_layers) * static_cast<size_t>(win) *
                    static_cast<size_t>(ring_row_bytes_));
  snap.tails.clear();
  snap.counts.clear();
  uint8_t* out = snap.rings.data();
  for (int l = 0; l < c.num_layers; ++l) {
    const V41LayerState& ls = state.layers[static_cast<size_t>(l)];
    for (int i = 0; i < win; ++i, out += ring_row_bytes_)
      model::entry_pack(EntryFormat::Fp8B32, ls.ring.data() + static_cast<size_t>(i) * D, D, 0,
                        out);
    snap.counts.push_back(ls.compressed.count);
    snap.counts.push_back(ls.index_keys.count);
    if (c.is_kv_source(l) && c.ratio(l) > 1) {
      const size_t n = static_cast<size_t>(c.ratio(l)) * static_cast<size_t>(D);
      if (ls.tail_kv.size() == n && ls.tail_score.size() == n) {
        snap.tails.insert(snap.tails.end(), ls.tail_kv.begin(), ls.tail_kv.end());
        snap.tails.insert(snap.tails.end(), ls.tail_score.begin(), ls.tail_score.end());
      } else {  // the compressor has not run yet: its initial tail
        snap.tails.insert(snap.tails.end(), n, 0.0f);
        snap.tails.insert(snap.tails.end(), n, -std::numeric_limits<float>::infinity());
      }
    }
  }
  snap.recent_ids = state.recent_ids;
}

Status V41ModelRunner::restore(const Snapshot& snap, V41State& state) const {
  const V41Config& c = model_.config();
  const int D = c.head_dim, win = c.sliding_window;
  if (snap.position < 0) return Error{"v41 runner: a prefix hit found no snapshot"};
  state = fresh_;
  state.position = snap.position;
  const uint8_t* in = snap.rings.data();
  size_t tail = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    V41LayerState& ls = state.layers[static_cast<size_t>(l)];
    for (int i = 0; i < win; ++i, in += ring_row_bytes_)
      model::entry_unpack(EntryFormat::Fp8B32, in, D, 0,
                          ls.ring.data() + static_cast<size_t>(i) * D);
    ls.compressed.count = snap.counts[2 * static_cast<size_t>(l)];
    ls.index_keys.count = snap.counts[2 * static_cast<size_t>(l) + 1];
    if (c.is_kv_source(l) && c.ratio(l) > 1) {
      const size_t n = static_cast<size_t>(c.ratio(l)) * static_cast<size_t>(D);
      ls.tail_kv.assign(snap.tails.begin() + static_cast<std::ptrdiff_t>(tail),
                        snap.tails.begin() + static_cast<std::ptrdiff_t>(tail + n));
      ls.tail_score.assign(snap.tails.begin() + static_cast<std::ptrdiff_t>(tail + n),
                           snap.tails.begin() + static_cast<std::ptrdiff_t>(tail + 2 * n));
      tail += 2 * n;
    }
  }
  state.recent_ids = snap.recent_ids;
  return Status::Ok();
}

Status V41ModelRunner::execute(std::span<const RunnerSequence> batch, std::span<float> logits) {
  const int32_t vocab = vocab_size();
  const size_t n = batch.size();
  logits_row_.resize(n);
  size_t row = 0;
  // Validate the whole step first: a bad step changes no slot.
  for (size_t i = 0; i < n; ++i) {
    const RunnerSequence& seq = batch[i];
    if (seq.slot < 0 || seq.slot >= static_cast<int32_t>(slots_.size()))
      return Error{"v41 runner: bad state slot " + std::to_string(seq.slot)};
    for (size_t k = 0; k < i; ++k)
      if (batch[k].slot == seq.slot) return Error{"v41 runner: a step names a slot twice"};
    const int32_t end = seq.start + static_cast<int32_t>(seq.tokens.size());
    if (static_cast<int64_t>(seq.block_table.size()) * block_size_ < end)
      return Error{"v41 runner: the block table does not cover the step"};
    if (seq.fresh && seq.start > 0) {
      if (!caching_ || seq.start % block_size_ != 0)
        return Error{"v41 runner: a prefix hit needs a snapshot at a block boundary"};
    } else if (!seq.fresh && slots_[seq.slot].position != seq.start) {
      return Error{"v41 runner: slot " + std::to_string(seq.slot) + " is at position " +
                   std::to_string(slots_[seq.slot].position) + ", the step starts at " +
                   std::to_string(seq.start)};
    }
    logits_row_[i] = row;
    if (seq.want_logits) ++row;
  }
  if (logits.size() < row * static_cast<size_t>(vocab))
    return Error{"v41 runner: the logits buffer is too small"};
  // Each sequence's prompt pieces run alone (positions up to the next block boundary); then
  // rounds of the single-token pieces (generated positions) of every sequence that has one left,
  // one forward_batch each: each piece's logits and state equal those of running it alone.
  next_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const RunnerSequence& seq = batch[i];
    V41State& state = slots_[seq.slot];
    if (seq.fresh) {
      if (seq.start == 0) {
        state = fresh_;
      } else {
        const int32_t hit_block = seq.block_table[seq.start / block_size_ - 1];
        if (Status s = restore(snapshots_by_block_[hit_block], state); !s.ok()) return s;
        if (state.position != seq.start)
          return Error{"v41 runner: the snapshot of block " + std::to_string(hit_block) +
                       " is at position " + std::to_string(state.position) + ", the hit at " +
                       std::to_string(seq.start)};
      }
    }
    state.bind_table(seq.block_table);
    const int32_t end = seq.start + static_cast<int32_t>(seq.tokens.size());
    int32_t p = seq.start;
    for (; p < end && p < seq.num_prompt;) {
      const int32_t piece_end =
          std::min({end, seq.num_prompt, (p / block_size_ + 1) * block_size_});
      const bool want = piece_end == end && seq.want_logits;
      const int64_t last = piece_end - p - 1;
      if (Status s = model_.forward(
              state,
              seq.tokens.subspan(static_cast<size_t>(p - seq.start),
                                 static_cast<size_t>(piece_end - p)),
              want ? std::span<const int64_t>(&last, 1) : std::span<const int64_t>(),
              want ? logits.data() + logits_row_[i] * static_cast<size_t>(vocab) : nullptr);
          !s.ok())
        return s;
      p = piece_end;
      if (caching_ && p % block_size_ == 0)
        save(state, snapshots_by_block_[static_cast<size_t>(seq.block_table[p / block_size_ - 1])]);
    }
    next_[i] = p;
  }
  static constexpr int64_t kLastRow = 0;
  for (;;) {
    decode_.clear();
    decode_seq_.clear();
    for (size_t i = 0; i < n; ++i) {
      const RunnerSequence& seq = batch[i];
      const int32_t p = next_[i], end = seq.start + static_cast<int32_t>(seq.tokens.size());
      if (p >= end) continue;
      const bool want = p + 1 == end && seq.want_logits;
      decode_.push_back(
          {&slots_[seq.slot], seq.tokens.subspan(static_cast<size_t>(p - seq.start), 1),
           want ? std::span<const int64_t>(&kLastRow, 1) : std::span<const int64_t>(),
           want ? logits.data() + logits_row_[i] * static_cast<size_t>(vocab) : nullptr});
      decode_seq_.push_back(i);
    }
    if (decode_.empty()) break;
    if (Status s = model_.forward_batch(decode_); !s.ok()) return s;
    for (size_t i : decode_seq_) {
      const RunnerSequence& seq = batch[i];
      const int32_t p = ++next_[i];
      if (caching_ && p % block_size_ == 0)
        save(slots_[seq.slot],
             snapshots_by_block_[static_cast<size_t>(seq.block_table[p / block_size_ - 1])]);
    }
  }
  return Status::Ok();
}

}  // namespace deepinfer::engine
