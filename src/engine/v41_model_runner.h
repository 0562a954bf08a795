// V41ModelRunner: the ModelRunner over the DeepSeek V4.1 CPU model (model/v41_model.h). The
// compressed KV of the kv-source layers (stored once per source group, spec §12.2 item 3) and the
// index keys of the key owners (item 4) live inside the engine's blocks in their QAT storage
// formats (FP4 e2m1 + E4M3 per 16, MXFP4; item 6), paged through each request's block table. A
// state slot holds the bounded state the forward works on (window rings, compressor tails, recent
// ids). Exact prefix caching keeps one snapshot per block end with the rings packed as FP8
// (e4m3 + UE8M0 per 32) — every stored value already lies on its grid, so all of it is lossless.
// Every sequence runs in the same pieces whatever the batch or the scheduler's chunking (prompt
// positions up to the next block boundary, alone; generated positions one at a time), so a
// request's logits do not depend on its neighbours, on prefix hits or on preemption: the
// single-token pieces of a step's sequences run together, one V41Model::forward_batch per round
// (each weight read once per GEMV run of the batch), whose rows equal those of running alone,
// bitwise.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model_runner.h"
#include "model/v41_model.h"

namespace deepinfer::engine {

class V41ModelRunner : public ModelRunner {
 public:
  // snapshots: exact prefix caching (off: the engine turns prefix caching off). pack_entries: the
  // QAT storage formats in the blocks (off: fp32 rows, for comparisons).
  explicit V41ModelRunner(model::v41::V41Model& model, bool snapshots = true,
                          bool pack_entries = true);

  int32_t vocab_size() const override;
  // The paged entries of one block plus, with snapshots, one packed bounded-state snapshot.
  int64_t bytes_per_block(int32_t block_size) const override;
  // One slot: the fp32 rings and tails the forward works on.
  int64_t bytes_per_slot() const override;
  bool exact_prefix_snapshots() const override { return snapshots_; }
  Status allocate(const KvCacheConfig& config) override;
  Status execute(std::span<const RunnerSequence> batch, std::span<float> logits) override;

  // Entry bytes one block takes in the arena (all kv sources, as stored).
  int64_t entry_bytes_per_block(int32_t block_size) const;

 private:
  // The bounded state at a block end: rings packed FP8, tails fp32, counters, recent ids.
  struct Snapshot {
    int64_t position = -1;
    std::vector<uint8_t> rings;
    std::vector<float> tails;
    std::vector<int64_t> counts;  // per layer: compressed, index keys
    std::vector<int32_t> recent_ids;
  };
  void save(const model::v41::V41State& state, Snapshot& snap) const;
  Status restore(const Snapshot& snap, model::v41::V41State& state) const;

  model::v41::V41Model& model_;
  bool snapshots_;
  bool pack_;
  int32_t block_size_ = 0;
  bool caching_ = false;
  int ring_row_bytes_ = 0;
  std::vector<uint64_t> arena_;  // num_blocks · block bytes (8-byte aligned)
  model::v41::V41State fresh_;   // position 0, stores paged into the arena
  std::vector<model::v41::V41State> slots_;
  std::vector<Snapshot> snapshots_by_block_;
  std::vector<size_t> logits_row_;
  std::vector<int32_t> next_;  // per step sequence: its next position to run
  std::vector<model::v41::V41BatchSequence> decode_;
  std::vector<size_t> decode_seq_;
};

}  // namespace deepinfer::engine
