// V4ModelRunner: the ModelRunner over the DeepSeek V4 CPU model (src/model). Each state slot
// holds one model::SequenceState (window rings, compressor tails, compressed entries and index
// keys of every layer, spec §7.1); exact prefix caching snapshots that state at block ends.
// Every forward call covers the same positions whatever the batch or the scheduler's chunking
// (prompt positions in block-aligned pieces, generated positions one at a time), so a request's
// logits do not depend on its neighbours, on prefix hits or on preemption.
#pragma once

#include <memory>
#include <vector>

#include "engine/model_runner.h"
#include "model/model.h"

namespace deepinfer::engine {

// How a prefix-cache hit at position P rebuilds the bounded state.
enum class PrefixMode {
  kExact,          // restore the snapshot taken at P
  kBoundedReplay,  // keep only compressed entries (+ index keys); rebuild the window rings and
                   // compressor tails by replaying [S, P), S = P - replay rounded down to a
                   // multiple of 128, from empty (zero) rings; the exact stored entries are kept
};

class V4ModelRunner : public ModelRunner {
 public:
  explicit V4ModelRunner(model::Model& model, bool snapshots = true,
                         PrefixMode mode = PrefixMode::kExact, int32_t replay_tokens = 0);

  int32_t vocab_size() const override;
  // As stored by model::SequenceState (fp32): compressed entries + index keys per position,
  // plus, with snapshots, one bounded-state copy per block.
  int64_t bytes_per_block(int32_t block_size) const override;
  int64_t bytes_per_slot() const override;
  bool exact_prefix_snapshots() const override { return snapshots_; }
  Status allocate(const KvCacheConfig& config) override;
  Status execute(std::span<const RunnerSequence> batch, std::span<float> logits) override;

  // Compressed-cache bytes per token over all layers as stored (fp32, see kv_layout.h); the
  // bounded state per sequence is bytes_per_slot().
  int64_t compressed_bytes_per_token() const;

 private:
  Status restore_by_replay(const RunnerSequence& seq, model::SequenceState& state);
  Status run_piece(model::SequenceState& state, std::span<const int32_t> ids, bool want_logits,
                   float* logits);

  model::Model& model_;
  bool snapshots_;
  PrefixMode mode_;
  int32_t replay_tokens_;  // 0: sliding_window + the largest compress ratio
  int32_t block_size_ = 0;
  bool caching_ = false;
  std::vector<model::SequenceState> slots_;
  std::vector<model::SequenceState> block_snapshots_;  // by block id (empty until written)
};

}  // namespace deepinfer::engine
