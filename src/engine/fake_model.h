// FakeModel: a deterministic stand-in for tests and benchmarks. It keeps real paged state
// (one 64-bit "kv" value per position, chained through the previous position's kv read back
// via the block table) and a per-slot window of the last tokens with block-end snapshots, so a
// wrong block table, a bad prefix hit or a lost window changes the logits.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model_runner.h"

namespace deepinfer::engine {

struct FakeModelConfig {
  int32_t vocab_size = 256;
  int32_t window = 5;          // tokens in the per-slot window state
  bool snapshots = true;       // exact prefix caching support
  int64_t work_per_token = 0;  // extra hash rounds per token (to emulate compute in benches)
};

class FakeModel : public ModelRunner {
 public:
  explicit FakeModel(const FakeModelConfig& config = {});

  int32_t vocab_size() const override { return config_.vocab_size; }
  int64_t bytes_per_block(int32_t block_size) const override { return 8 * int64_t{block_size}; }
  int64_t bytes_per_slot() const override { return 8 * int64_t{config_.window + 1}; }
  bool exact_prefix_snapshots() const override { return config_.snapshots; }
  Status allocate(const KvCacheConfig& config) override;
  Status execute(std::span<const RunnerSequence> batch, std::span<float> logits) override;

  // The logits row for `tokens[0..n)` computed from scratch (the reference for tests).
  static std::vector<float> reference_logits(const FakeModelConfig& config,
                                             std::span<const int32_t> tokens);

  int64_t tokens_processed() const { return tokens_processed_; }

 private:
  struct Window {
    std::vector<uint64_t> ring;  // last `window` token hashes, slot p % window
  };
  FakeModelConfig config_;
  int32_t block_size_ = 0;
  std::vector<uint64_t> kv_;       // num_blocks * block_size
  std::vector<uint8_t> written_;   // kv_ entry written since allocation
  std::vector<Window> slots_;      // per state slot
  std::vector<Window> snapshots_;  // per block
  int64_t tokens_processed_ = 0;
};

}  // namespace deepinfer::engine
