// Token sampling on the device for rows of logits, with the engine Sampler's semantics
// (src/engine/sampler.cpp) for what it covers: greedy (argmax, lowest id on ties), temperature,
// min_p, top_k ≤ kMaxDeviceTopK, top_p with a top_k, and the inverse-CDF draw of a host-made
// uniform (the engine's Philox value, so a request's draws do not depend on where it samples).
// Logit bias, penalties, grammar masks and logprobs stay on the host.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/result.h"

namespace deepinfer::cuda {

inline constexpr int kMaxDeviceTopK = 2048;

struct SampleSpec {
  int32_t mode = 0;  // 0: no token wanted (the row's token is -1), 1: greedy, 2: draw
  float inv_temperature = 1.0f;
  int32_t top_k = 0;       // 0: off; else 1 … kMaxDeviceTopK
  float top_p = 1.0f;      // < 1 only with top_k
  float log_min_p = 0.0f;  // std::log(min_p), used when has_min_p
  int32_t has_min_p = 0;
  double uniform = 0.0;  // the draw in [0, 1)
};

// The tokens sample_rows picks for host logits [specs.size(), V] (tests; allocates per call).
Result<std::vector<int32_t>> sample_on_device(std::span<const float> logits, int64_t V,
                                              std::span<const SampleSpec> specs);

}  // namespace deepinfer::cuda
