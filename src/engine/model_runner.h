// ModelRunner: what the engine asks of a model. One call runs one step for a batch of
// sequences, each with its state slot, block table and new tokens, and returns a logits row
// for each sequence that asks for one. The runner knows nothing of requests' lifecycles.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "common/result.h"
#include "engine/kv_cache_manager.h"

namespace deepinfer::engine {

// A token a runner that samples_on_device() may draw itself instead of returning the logits row,
// for parameters the Sampler's device counterpart covers (device_samplable in sampler.h).
struct DeviceSample {
  bool greedy = true;
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  double uniform = 0.0;  // the Sampler's Philox draw for this token
};

// The largest top_k a runner's device sampling takes.
inline constexpr int32_t kDeviceSampleMaxTopK = 2048;

struct RunnerSequence {
  int32_t slot = 0;                      // bounded per-sequence state (window ring, tails)
  int32_t start = 0;                     // position of tokens[0]
  std::span<const int32_t> tokens;       // new tokens: positions [start, start + size)
  std::span<const int32_t> context;      // every known token of the sequence (for replays)
  std::span<const int32_t> block_table;  // blocks covering [0, start + size)
  // First chunk in this slot: start == 0 resets the state; start > 0 is a prefix-cache hit and
  // restores the state snapshot saved at the end of block_table[start / block_size - 1].
  bool fresh = false;
  bool want_logits = false;  // logits of the last new token
  int32_t num_prompt = 0;    // the request's prompt length (runners may chunk prompt and
                             // generated positions differently)
  const DeviceSample* device_sample = nullptr;  // with want_logits, on samples_on_device()
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual int32_t vocab_size() const = 0;
  // KV bytes one block of `block_size` positions takes (all layers), and one state slot.
  virtual int64_t bytes_per_block(int32_t block_size) const = 0;
  virtual int64_t bytes_per_slot() const = 0;
  // True when the runner snapshots the bounded state at block ends, so that a prefix hit is
  // exact. Without it the engine turns prefix caching off.
  virtual bool exact_prefix_snapshots() const = 0;

  // Sizes the paged KV store and the state slots; called once before any execute().
  virtual Status allocate(const KvCacheConfig& config) = 0;

  // Runs the batch. `logits` has one row of vocab_size() floats per sequence with want_logits,
  // in batch order. A sequence's rows must not depend on the rest of the batch. When snapshots
  // are on, after position p with (p + 1) % block_size == 0 the bounded state is saved for
  // block_table[(p + 1) / block_size - 1].
  virtual Status execute(std::span<const RunnerSequence> batch, std::span<float> logits) = 0;

  // Runners that sample on the device: execute(), and for a sequence with device_sample its token
  // in tokens[row] (its logits row then need not be written), or -1 where it was not sampled
  // there (the engine samples that row from its logits).
  virtual bool samples_on_device() const { return false; }
  virtual Status execute_sampling(std::span<const RunnerSequence> batch, std::span<float> logits,
                                  std::span<int32_t> tokens) {
    std::fill(tokens.begin(), tokens.end(), -1);
    return execute(batch, logits);
  }
};

}  // namespace deepinfer::engine
