// Sampler: one logits row + the request's parameters and history → one token (+ logprobs).
// Order (vLLM v1): logit_bias, repetition, frequency, presence penalties; temperature; min_p;
// top_k; top_p; inverse-CDF draw with Philox(seed, token index). Scratch buffers are reused:
// no heap allocation per token once constructed. Not thread-safe: one Sampler per thread.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampling_params.h"

namespace deepinfer::engine {

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct SampleResult {
  int32_t token = 0;
  float logprob = 0.0f;  // log-softmax of the raw logits at `token` (when params.logprobs)
  int32_t num_top = 0;   // entries used in `top`, sorted by logprob, lowest id first on ties
  std::array<TokenLogprob, kMaxTopLogprobs> top{};
};

struct SampleContext {
  const SamplingParams& params;
  uint64_t seed = 0;                // params.seed or the engine-drawn seed
  std::span<const int32_t> prompt;  // prompt token ids (repetition penalty)
  std::span<const int32_t> output;  // generated ids; output.size() is this token's index
  // Optional allowed-token bitmask (bit t of word t / 64; structured output): tokens outside
  // it are removed before temperature and sampling. Empty: no mask.
  std::span<const uint64_t> allowed = {};
};

// Temperatures below this sample greedily.
inline constexpr float kGreedyEpsilon = 1e-5f;

// Whether a runner's device sampling (DeviceSample, backend/cuda/sampling.h) draws what sample()
// would: no logprobs, biases, penalties or grammar; top_k off or ≤ max_top_k; top_p only with a
// top_k.
bool device_samplable(const SamplingParams& p, int32_t max_top_k);

class Sampler {
 public:
  explicit Sampler(int32_t vocab_size);

  // `logits` has vocab_size entries. Never allocates.
  SampleResult sample(std::span<const float> logits, const SampleContext& ctx);

  int32_t vocab_size() const { return vocab_size_; }

 private:
  void apply_bias_and_penalties(const SampleContext& ctx);
  void fill_logprobs(std::span<const float> logits, int32_t token, int32_t num_top,
                     SampleResult& out) const;

  int32_t vocab_size_;
  std::vector<float> work_;          // processed logits
  std::vector<int32_t> candidates_;  // surviving token ids
  std::vector<float> probs_;         // exp(logit - max) per candidate
  std::vector<double> cumulative_;   // running sums of probs_ (the inverse-CDF draw)
  std::vector<uint32_t> count_stamp_, rep_stamp_;
  std::vector<int32_t> counts_;
  uint32_t epoch_ = 0;
};

}  // namespace deepinfer::engine
