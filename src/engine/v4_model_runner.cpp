// V4ModelRunner implementation.
#include "engine/v4_model_runner.h"

#include <algorithm>
#include <string>

#include "engine/kv_layout.h"

namespace deepinfer::engine {

V4ModelRunner::V4ModelRunner(model::Model& model, bool snapshots, PrefixMode mode,
                             int32_t replay_tokens)
    : model_(model), snapshots_(snapshots), mode_(mode), replay_tokens_(replay_tokens) {
  if (replay_tokens_ <= 0) {
    int max_ratio = 0;
    for (int r : model.config().compress_ratios) max_ratio = std::max(max_ratio, r);
    replay_tokens_ = model.config().sliding_window + max_ratio;
  }
}

Status V4ModelRunner::restore_by_replay(const RunnerSequence& seq, model::SequenceState& state) {
  const model::SequenceState& snap = block_snapshots_[seq.block_table[seq.start / block_size_ - 1]];
  const model::ModelConfig& c = model_.config();
  const int64_t replay_from = std::max<int64_t>(0, seq.start - replay_tokens_) / 128 * 128;
  auto copy_entries = [&](int64_t upto) {
    for (int layer = 0; layer < c.num_layers; ++layer) {
      const int r = c.ratio(layer);
      if (r == 0) continue;
      const model::BlockState& from = snap.blocks[layer];
      model::BlockState& to = state.blocks[layer];
      const int64_t n = upto / r;
      to.compressed.assign(from.compressed.begin(), from.compressed.begin() + n * c.head_dim);
      to.n_compressed = n;
      if (from.index_head_dim > 0)
        to.index_keys.assign(from.index_keys.begin(),
                             from.index_keys.begin() + n * from.index_head_dim);
    }
  };
  state = model_.new_state();
  copy_entries(replay_from);
  state.position = replay_from;
  for (int64_t p = replay_from; p < seq.start;) {
    const int64_t end = std::min<int64_t>(seq.start, (p / block_size_ + 1) * block_size_);
    if (Status s = run_piece(state, seq.context.subspan(p, end - p), false, nullptr); !s.ok())
      return s;
    p = end;
  }
  copy_entries(seq.start);  // the stored (exact) entries win over the replayed ones
  return Status::Ok();
}

int32_t V4ModelRunner::vocab_size() const { return model_.config().vocab_size; }

int64_t V4ModelRunner::compressed_bytes_per_token() const {
  return static_cast<int64_t>(v4_kv_bytes_stored(model_.config()).per_token + 0.999);
}

int64_t V4ModelRunner::bytes_per_slot() const {
  const V4KvBytes b = v4_kv_bytes_stored(model_.config());
  return b.ring_bytes + b.tail_bytes;
}

int64_t V4ModelRunner::bytes_per_block(int32_t block_size) const {
  return compressed_bytes_per_token() * block_size + (snapshots_ ? bytes_per_slot() : 0);
}

Status V4ModelRunner::allocate(const KvCacheConfig& config) {
  block_size_ = config.block_size;
  caching_ = snapshots_ && config.prefix_caching;
  slots_.assign(config.num_state_slots, model::SequenceState{});
  block_snapshots_.assign(caching_ ? config.num_blocks : 0, model::SequenceState{});
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
  size_t row = 0;
  for (const RunnerSequence& seq : batch) {
    if (seq.slot < 0 || seq.slot >= static_cast<int32_t>(slots_.size()))
      return Error{"v4 runner: bad state slot " + std::to_string(seq.slot)};
    model::SequenceState& state = slots_[seq.slot];
    if (seq.fresh) {
      if (seq.start == 0) {
        state = model_.new_state();
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
    if (state.position != seq.start)
      return Error{"v4 runner: slot " + std::to_string(seq.slot) + " is at position " +
                   std::to_string(state.position) + ", the step starts at " +
                   std::to_string(seq.start)};
    const int32_t end = seq.start + static_cast<int32_t>(seq.tokens.size());
    for (int32_t p = seq.start; p < end;) {
      // Prompt positions run up to the next block boundary; generated ones one at a time.
      int32_t piece_end = p + 1;
      if (p < seq.num_prompt)
        piece_end = std::min({end, seq.num_prompt, (p / block_size_ + 1) * block_size_});
      const bool last = piece_end == end;
      float* out = logits.data() + row * vocab;
      if (Status s = run_piece(state, seq.tokens.subspan(p - seq.start, piece_end - p),
                               last && seq.want_logits, out);
          !s.ok())
        return s;
      if (caching_ && piece_end % block_size_ == 0)
        block_snapshots_[seq.block_table[piece_end / block_size_ - 1]] = state;
      p = piece_end;
    }
    if (seq.want_logits) ++row;
  }
  return Status::Ok();
}

}  // namespace deepinfer::engine
