// V4ModelRunner: the ModelRunner over the DeepSeek V4 CPU model (src/model). The compressed KV
// (CSA entries, index keys, HCA entries) lives inside the engine's blocks: one arena of
// num_blocks blocks, each holding, per compressed layer, the entries whose last position falls in
// that block, in the model's row format (packed FP8 / MXFP4 rows under the official numerics,
// fp32 under the exact ones). Each state slot holds only the bounded state (window rings,
// compressor tails; spec §7.1) and reads its entries through its request's block table; exact
// prefix caching snapshots that bounded state at block ends. Every forward call covers the same
// positions whatever the batch or the scheduler's chunking (prompt positions in block-aligned
// pieces, generated positions one at a time), so a request's logits do not depend on its
// neighbours, on prefix hits or on preemption.
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
                   // multiple of 128, from empty (zero) rings; the stored entries are used (the
                   // replay's own copies of entries below P are dropped), no snapshots are kept
};

class V4ModelRunner : public ModelRunner {
 public:
  explicit V4ModelRunner(model::Model& model, bool snapshots = true,
                         PrefixMode mode = PrefixMode::kExact, int32_t replay_tokens = 0,
                         bool pack_entries = true);

  int32_t vocab_size() const override;
  // The paged compressed entries of one block (all layers, as stored) plus, with exact
  // snapshots, one bounded-state copy per block.
  int64_t bytes_per_block(int32_t block_size) const override;
  int64_t bytes_per_slot() const override;
  bool exact_prefix_snapshots() const override {
    return snapshots_ || mode_ == PrefixMode::kBoundedReplay;
  }
  Status allocate(const KvCacheConfig& config) override;
  Status execute(std::span<const RunnerSequence> batch, std::span<float> logits) override;

  // Compressed-entry bytes one block of block_size positions takes in the arena (all layers).
  int64_t entry_bytes_per_block(int32_t block_size) const;

  // On (default): each round of pieces runs as one model::Model::forward_batch. Off: the
  // sequences run one after another (the same bits; for comparisons).
  void set_batched_forward(bool on) { batched_ = on; }

 private:
  Status restore_by_replay(const RunnerSequence& seq, model::SequenceState& state);
  Status run_piece(model::SequenceState& state, std::span<const int32_t> ids, bool want_logits,
                   float* logits);

  model::Model& model_;
  bool snapshots_;
  PrefixMode mode_;
  int32_t replay_tokens_;  // 0: sliding_window + the largest compress ratio
  bool pack_;
  bool batched_ = true;
  int32_t block_size_ = 0;
  bool caching_ = false;
  std::vector<uint64_t> arena_;  // num_blocks · block bytes (8-byte aligned)
  model::SequenceState fresh_;   // position 0, stores paged into the arena
  std::vector<model::SequenceState> slots_;
  std::vector<model::SequenceState> block_snapshots_;  // by block id (exact mode)
  // execute() scratch: per sequence its next position, logits row and last-row index; a round.
  std::vector<int32_t> cursor_;
  std::vector<size_t> logits_row_;
  std::vector<int64_t> last_row_;
  std::vector<model::BatchSequence> round_;
  std::vector<size_t> round_seq_;
};

}  // namespace deepinfer::engine
