#include "server/request_params.h"

#include <cmath>

namespace deepinfer::server {
std::optional<double> optional_number(const JsonObject& body, std::string_view key) {
  auto it = body.find(key);
  if (it == body.end() || it->value().is_null()) return std::nullopt;
  const Json& v = it->value();
  if (v.is_double()) return v.get_double();
  if (v.is_int64()) return static_cast<double>(v.get_int64());
  if (v.is_uint64()) return static_cast<double>(v.get_uint64());
  return std::nan("");  // present but not a number
}

namespace {

Error type_error(std::string_view key, std::string_view want) {
  return Error{std::string(key) + " must be " + std::string(want)};
}

}  // namespace

Result<ApiSampling> sampling_from_request(const JsonObject& body,
                                          const recipe::ConversationRequest& request,
                                          recipe::Protocol protocol, int64_t prompt_tokens,
                                          const RequestLimits& limits) {
  ApiSampling out;
  auto& p = out.params;
  const auto& inference = request.inference_options;
  p.temperature = inference.temperature.value_or(1.0f);
  p.top_p = inference.top_p.value_or(1.0f);

  const int64_t room = limits.max_model_len - prompt_tokens;
  if (room <= 0) {
    return Error{"This model's maximum context length is " + std::to_string(limits.max_model_len) +
                 " tokens. However, your prompt has " + std::to_string(prompt_tokens) + " tokens."};
  }
  if (inference.max_tokens) {
    if (*inference.max_tokens > room) {
      return Error{"max_tokens (" + std::to_string(*inference.max_tokens) +
                   ") plus the prompt (" + std::to_string(prompt_tokens) +
                   " tokens) exceeds the maximum context length of " +
                   std::to_string(limits.max_model_len) + " tokens"};
    }
    p.max_tokens = static_cast<int32_t>(*inference.max_tokens);
  } else {
    const int64_t fallback = request.conversation.thinking_mode ? 65536 : 8192;
    p.max_tokens = static_cast<int32_t>(std::min(fallback, room));
  }

  auto seed = optional_number(body, "seed");
  if (seed) {
    if (std::isnan(*seed) || *seed < 0 || *seed >= 9.2233720368547758e18 || *seed != std::floor(*seed))
      return type_error("seed", "an integer in [0, 2^63)");
    p.seed = static_cast<uint64_t>(*seed);
  }
  if (auto top_k = optional_number(body, "top_k")) {
    if (std::isnan(*top_k) || *top_k != std::floor(*top_k) || *top_k < -1 || *top_k > 1e9)
      return type_error("top_k", "an integer >= -1");
    p.top_k = static_cast<int32_t>(*top_k);
  }
  if (auto min_p = optional_number(body, "min_p")) {
    if (std::isnan(*min_p) || *min_p < 0 || *min_p > 1) return type_error("min_p", "in [0, 1]");
    p.min_p = static_cast<float>(*min_p);
  }
  for (auto [key, field] : {std::pair{"presence_penalty", &p.presence_penalty},
                            std::pair{"frequency_penalty", &p.frequency_penalty}}) {
    if (auto v = optional_number(body, key)) {
      if (std::isnan(*v) || *v < -2 || *v > 2) return type_error(key, "in [-2, 2]");
      *field = static_cast<float>(*v);
    }
  }
  if (auto v = optional_number(body, "repetition_penalty")) {
    if (std::isnan(*v) || *v <= 0 || *v > 100) return type_error("repetition_penalty", "in (0, 100]");
    p.repetition_penalty = static_cast<float>(*v);
  }
  if (auto it = body.find("logit_bias"); it != body.end() && !it->value().is_null()) {
    if (!it->value().is_object()) return type_error("logit_bias", "an object of token ids to numbers");
    for (const auto& [key, value] : it->value().get_object()) {
      char* end = nullptr;
      const std::string k(key);
      const long id = std::strtol(k.c_str(), &end, 10);
      if (k.empty() || *end != '\0' || id < 0 || id >= limits.vocab_size)
        return Error{"logit_bias: invalid token id '" + k + "'"};
      if (!value.is_number()) return Error{"logit_bias values must be numbers"};
      const double bias = value.to_number<double>();
      if (bias < -100 || bias > 100) return Error{"logit_bias values must be in [-100, 100]"};
      p.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias));
    }
  }
  if (auto it = body.find("ignore_eos"); it != body.end() && it->value().is_bool())
    p.ignore_eos = it->value().get_bool();
  if (auto it = body.find("stop_token_ids"); it != body.end() && !it->value().is_null()) {
    if (!it->value().is_array()) return type_error("stop_token_ids", "an array of token ids");
    for (const auto& v : it->value().get_array()) {
      if (!v.is_int64() || v.get_int64() < 0 || v.get_int64() >= limits.vocab_size)
        return Error{"stop_token_ids: invalid token id"};
      p.stop_token_ids.push_back(static_cast<int32_t>(v.get_int64()));
    }
  }
  // logprobs: Chat has a bool + top_logprobs; legacy Completions an integer count.
  if (auto it = body.find("logprobs"); it != body.end() && !it->value().is_null()) {
    const Json& v = it->value();
    if (v.is_bool()) {
      p.logprobs = v.get_bool();
    } else if (v.is_int64() && protocol == recipe::Protocol::ChatCompletions) {
      return type_error("logprobs", "a boolean");
    } else if (v.is_int64()) {
      if (v.get_int64() < 0 || v.get_int64() > engine::kMaxTopLogprobs)
        return type_error("logprobs", "in [0, 20]");
      p.logprobs = true;
      p.top_logprobs = static_cast<int32_t>(v.get_int64());
    } else {
      return type_error("logprobs", "a boolean");
    }
  }
  if (auto v = optional_number(body, "top_logprobs")) {
    if (std::isnan(*v) || *v < 0 || *v > engine::kMaxTopLogprobs || *v != std::floor(*v))
      return type_error("top_logprobs", "an integer in [0, 20]");
    p.top_logprobs = static_cast<int32_t>(*v);
    if (p.top_logprobs > 0 && protocol == recipe::Protocol::ChatCompletions && !p.logprobs)
      return Error{"top_logprobs requires logprobs to be true"};
  }
  // Responses: `include: ["message.output_text.logprobs"]` asks for the output_text logprobs;
  // top_logprobs (above) sets the alternatives per token. Other include values are accepted.
  // (Responses has no `logprobs` field; top_logprobs alone asks for nothing.)
  if (protocol == recipe::Protocol::Responses) {
    p.logprobs = false;
    if (auto it = body.find("include"); it != body.end() && !it->value().is_null()) {
      if (!it->value().is_array()) return type_error("include", "an array of strings");
      for (const auto& v : it->value().get_array()) {
        if (!v.is_string()) return type_error("include", "an array of strings");
        if (v.get_string() == "message.output_text.logprobs") p.logprobs = true;
      }
    }
    if (!p.logprobs) p.top_logprobs = 0;
  }
  if (auto v = optional_number(body, "n")) {
    if (std::isnan(*v) || *v < 1 || *v > 16 || *v != std::floor(*v))
      return type_error("n", "an integer in [1, 16]");
    out.n = static_cast<int>(*v);
  }
  if (limits.structured != nullptr && limits.structured->cache != nullptr) {
    auto constraint = structured_from_request(body, request, *limits.structured);
    if (!constraint.ok()) return constraint.error();
    p.structured = std::move(constraint.value());
  }
  auto status = engine::validate(p, limits.vocab_size);
  if (!status.ok()) return status.error();
  return out;
}

}  // namespace deepinfer::server
