// OpenAI Chat `logprobs` from the engine's per-token sample results: the
// {"content":[{"token","logprob","bytes","top_logprobs":[…]}]} object of a complete response.
// Token text is the token's bytes with invalid UTF-8 replaced by U+FFFD; `bytes` are the raw bytes.
#pragma once

#include <vector>

#include "common/json.h"
#include "engine/sampler.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

class LogprobsCollector {
 public:
  LogprobsCollector(const tokenizer::Tokenizer& tokenizer, int top_logprobs)
      : tokenizer_(tokenizer), top_(top_logprobs) {}
  void add(const engine::SampleResult& sample) { samples_.push_back(sample); }
  Json to_json() const;  // {"content":[…]}

 private:
  Json entry(int32_t token, float logprob) const;
  const tokenizer::Tokenizer& tokenizer_;
  int top_;
  std::vector<engine::SampleResult> samples_;
};

}  // namespace deepinfer::server
