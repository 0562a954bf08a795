// V4ModelRunner implementation.
#include "engine/v4_model_runner.h"

#include <algorithm>
#include <string>

#include "engine/kv_layout.h"

namespace deepinfer::engine {
namespace {

// Bytes of one store's region inside a block: max(1, block_size / ratio) rows, 8-byte aligned.
int64_t region_bytes(const model::EntryStore& s, int32_t block_size) {
  const int64_t rows = std::max(1, block_size / s.ratio);
  return (rows * s.row_bytes + 7) / 8 * 8;
}

}  // namespace

V4ModelRunner::V4ModelRunner(model::Model& model, bool snapshots, PrefixMode mode,
                             int32_t replay_tokens, bool pack_entries)
    : model_(model),
      snapshots_(snapshots),
      mode_(mode),
      replay_tokens_(replay_tokens),
      pack_(pack_entries) {
  if (replay_tokens_ <= 0) {
    int max_ratio = 0;
    for (int r : model.config().compress_ratios) max_ratio = std::max(max_ratio, r);
    replay_tokens_ = model.config().sliding_window + max_ratio;
  }
  fresh_ = model_.new_state(pack_);
}

Status V4ModelRunner::restore_by_replay(const RunnerSequence& seq, model::SequenceState& state) {
  const model::ModelConfig& c = model_.config();
  const int64_t replay_from = std::max<int64_t>(0, seq.start - replay_tokens_) / 128 * 128;
  state = fresh_;
  state.bind_table(seq.block_table);
  for (int layer = 0; layer < c.num_layers; ++layer) {
    const int r = c.ratio(layer);
    if (r == 0) continue;
    model::BlockState& b = state.blocks[static_cast<size_t>(layer)];
    for (model::EntryStore* s : {&b.compressed, &b.index_keys}) {
      s->count = replay_from / r;
      s->frozen = seq.start / r;  // in the hit blocks already: the replay must not write them
    }
  }
  state.position = replay_from;
  for (int64_t p = replay_from; p < seq.start;) {
    const int64_t end = std::min<int64_t>(seq.start, (p / block_size_ + 1) * block_size_);
    if (Status s = run_piece(state, seq.context.subspan(p, end - p), false, nullptr); !s.ok())
      return s;
    p = end;
  }
  return Status::Ok();
}

int32_t V4ModelRunner::vocab_size() const { return model_.config().vocab_size; }

int64_t V4ModelRunner::entry_bytes_per_block(int32_t block_size) const {
  int64_t bytes = 0;
  for (const model::BlockState& b : fresh_.blocks) {
    if (b.compressed.ratio > 0) bytes += region_bytes(b.compressed, block_size);
    if (b.index_keys.ratio > 0) bytes += region_bytes(b.index_keys, block_size);
  }
  return bytes;
}

int64_t V4ModelRunner::bytes_per_slot() const {
  const V4KvBytes b = v4_kv_bytes_stored(model_.config());
  return b.ring_bytes + b.tail_bytes;
}

int64_t V4ModelRunner::bytes_per_block(int32_t block_size) const {
  const bool snap = snapshots_ && mode_ == PrefixMode::kExact;
  return entry_bytes_per_block(block_size) + (snap ? bytes_per_slot() : 0);
}

Status V4ModelRunner::allocate(const KvCacheConfig& config) {
  block_size_ = config.block_size;
  const int32_t bs = block_size_;
  for (const model::BlockState& b : fresh_.blocks) {
    const int r = b.compressed.ratio;
    if (r > 0 && bs % r != 0 && r % bs != 0)
      return Error{"v4 runner: the KV block size " + std::to_string(bs) +
                   " must divide or be a multiple of every compress ratio (" + std::to_string(r) +
                   ")"};
  }
  const int64_t block_bytes = entry_bytes_per_block(bs);
  arena_.assign(static_cast<size_t>((int64_t{config.num_blocks} * block_bytes + 7) / 8), 0);
  auto* base = reinterpret_cast<uint8_t*>(arena_.data());
  int64_t offset = 0;
  for (model::BlockState& b : fresh_.blocks) {
    for (model::EntryStore* s : {&b.compressed, &b.index_keys}) {
      if (s->ratio == 0) continue;
      s->pages = base + offset;
      s->page_stride = block_bytes;
      s->block_size = bs;
      offset += region_bytes(*s, bs);
    }
  }
  caching_ = config.prefix_caching && exact_prefix_snapshots();
  slots_.assign(config.num_state_slots, model::SequenceState{});
  const bool snap = caching_ && mode_ == PrefixMode::kExact;
  block_snapshots_.assign(snap ? config.num_blocks : 0, model::SequenceState{});
  return Status::Ok();
}

Status V4ModelRunner::run_piece(model::SequenceState& state, std::span<const int32_t> ids,
                                bool want_logits, float* logits) {
  const int64_t last = static_cast<int64_t>(ids.size()) - 1;
  return model_.forward(
      state, ids, want_logits ? std::span<const int64_t>(&last, 1) : std::span<const int64_t>(),
      logits);
}

Status V4ModelRunner::execute(std::span<const RunnerSequence> batch, std::span<float> logits) {
  const int32_t vocab = vocab_size();
  const size_t n = batch.size();
  cursor_.resize(n);
  logits_row_.resize(n);
  last_row_.resize(n);
  size_t row = 0;
  for (size_t i = 0; i < n; ++i) {
    const RunnerSequence& seq = batch[i];
    if (seq.slot < 0 || seq.slot >= static_cast<int32_t>(slots_.size()))
      return Error{"v4 runner: bad state slot " + std::to_string(seq.slot)};
    for (size_t k = 0; k < i; ++k)
      if (batch[k].slot == seq.slot) return Error{"v4 runner: a step names a slot twice"};
    model::SequenceState& state = slots_[seq.slot];
    if (seq.fresh) {
      if (seq.start == 0) {
        state = fresh_;
      } else {
        if (!caching_ || seq.start % block_size_ != 0)
          return Error{"v4 runner: a prefix hit needs a snapshot at a block boundary"};
        if (mode_ == PrefixMode::kBoundedReplay) {
          if (Status st = restore_by_replay(seq, state); !st.ok()) return st;
        } else {
          state = block_snapshots_[seq.block_table[seq.start / block_size_ - 1]];
        }
      }
    }
    state.bind_table(seq.block_table);
    if (state.position != seq.start)
      return Error{"v4 runner: slot " + std::to_string(seq.slot) + " is at position " +
                   std::to_string(state.position) + ", the step starts at " +
                   std::to_string(seq.start)};
    const int32_t end = seq.start + static_cast<int32_t>(seq.tokens.size());
    if (static_cast<int64_t>(seq.block_table.size()) * block_size_ < end)
      return Error{"v4 runner: the block table does not cover the step"};
    cursor_[i] = seq.start;
    logits_row_[i] = row;
    if (seq.want_logits) ++row;
  }
  // Rounds: every sequence's next piece in one batched forward. Prompt positions run up to the
  // next block boundary, generated ones one at a time, so each sequence's pieces (and its bits)
  // are those it has alone.
  for (;;) {
    round_.clear();
    round_seq_.clear();
    for (size_t i = 0; i < n; ++i) {
      const RunnerSequence& seq = batch[i];
      const int32_t p = cursor_[i], end = seq.start + static_cast<int32_t>(seq.tokens.size());
      if (p >= end) continue;
      int32_t piece_end = p + 1;
      if (p < seq.num_prompt)
        piece_end = std::min({end, seq.num_prompt, (p / block_size_ + 1) * block_size_});
      const bool want = piece_end == end && seq.want_logits;
      last_row_[i] = piece_end - p - 1;
      round_.push_back(
          {&slots_[seq.slot], seq.tokens.subspan(p - seq.start, piece_end - p),
           want ? std::span<const int64_t>(&last_row_[i], 1) : std::span<const int64_t>(),
           want ? logits.data() + logits_row_[i] * vocab : nullptr});
      cursor_[i] = piece_end;
      round_seq_.push_back(i);
    }
    if (round_.empty()) break;
    if (batched_) {
      if (Status s = model_.forward_batch(round_); !s.ok()) return s;
    } else {
      for (const model::BatchSequence& b : round_)
        if (Status s = model_.forward_batch(std::span(&b, 1)); !s.ok()) return s;
    }
    if (block_snapshots_.empty()) continue;
    for (size_t i : round_seq_) {
      const int32_t p = cursor_[i];
      if (p % block_size_ == 0)
        block_snapshots_[batch[i].block_table[p / block_size_ - 1]] = slots_[batch[i].slot];
    }
  }
  return Status::Ok();
}

}  // namespace deepinfer::engine
