// Per-request sampling parameters (OpenAI / vLLM semantics) and their validation. Plain data:
// the scheduler copies it into the request, the executor's Sampler reads it each token.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "common/result.h"

namespace deepinfer::engine {

namespace structured {
struct StructuredOutput;  // engine/structured_request.h
}

inline constexpr int32_t kMaxTopLogprobs = 20;

struct SamplingParams {
  float temperature = 1.0f;        // 0 (or below 1e-5) samples greedily: argmax, lowest id on ties.
  int32_t top_k = 0;               // 0 or -1: off.
  float top_p = 1.0f;              // (0, 1]: keep the smallest top set with mass >= top_p.
  float min_p = 0.0f;              // [0, 1]: drop tokens with p < min_p * p_max.
  float presence_penalty = 0.0f;   // logit -= presence_penalty if the token was generated.
  float frequency_penalty = 0.0f;  // logit -= frequency_penalty * times generated.
  float repetition_penalty = 1.0f;  // tokens in prompt or output: l > 0 ? l / rp : l * rp.
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to the raw logit (before penalties).
  std::optional<uint64_t> seed;                       // absent: the engine draws one per request.
  int32_t max_tokens = 16;  // generated tokens at most (the stop token counts).
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool logprobs = false;     // return the sampled token's log-probability (raw model output).
  int32_t top_logprobs = 0;  // and the n most likely tokens (0..20); needs logprobs.
  // Structured output: each token is sampled from the tokens the grammar allows (null: none).
  std::shared_ptr<const structured::StructuredOutput> structured;
};

// Checks ranges against the vocabulary; the message names the offending field.
Status validate(const SamplingParams& params, int32_t vocab_size);

}  // namespace deepinfer::engine
