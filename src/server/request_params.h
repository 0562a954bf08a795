// Sampling parameters of an API request: the recipe's inference options (max_tokens,
// temperature, top_p) plus the extra fields OpenAI/vLLM clients send that the recipe does not
// carry (seed, top_k, min_p, penalties, logit_bias, logprobs, n, ...), validated with 400s.
#pragma once

#include <string>

#include "common/json.h"
#include "common/result.h"
#include "engine/sampling_params.h"
#include "recipe/conversation.h"
#include "server/structured_params.h"

namespace deepinfer::server {

struct RequestLimits {
  int64_t max_model_len = 4096;
  int32_t vocab_size = 0;
  // Structured output (response_format, text.format, guided_*, strict tools); null: not read.
  const StructuredContext* structured = nullptr;
};

struct ApiSampling {
  engine::SamplingParams params;
  int n = 1;
};

// A numeric field: nullopt when absent or null, NaN when present but not a number.
std::optional<double> optional_number(const JsonObject& body, std::string_view key);

// `prompt_tokens` bounds max_tokens: default = min(8192 non-thinking / 65536 thinking,
// max_model_len - prompt_tokens); an explicit value beyond the context is an error.
Result<ApiSampling> sampling_from_request(const JsonObject& body,
                                          const recipe::ConversationRequest& request,
                                          recipe::Protocol protocol, int64_t prompt_tokens,
                                          const RequestLimits& limits);

}  // namespace deepinfer::server
