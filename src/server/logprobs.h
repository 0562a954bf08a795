// Per-token logprobs from the engine's sample results, written as JSON text in each API's shape:
// Chat `{"content":[{"token","logprob","bytes","top_logprobs":[…]}],"refusal":null}` and legacy
// Completions `{"text_offset","token_logprobs","tokens","top_logprobs"}` (the Responses
// output_text entries: output_text_logprobs.h). Tokens are collected as
// they are generated; each chunk (or the complete response) takes the ones not yet written, so
// the chunks of a stream together hold exactly the complete response's entries.
#pragma once

#include <string>
#include <vector>

#include "engine/sampler.h"
#include "recipe/stream_events.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

enum class LogprobsFormat { Chat, Completions };

class TokenLogprobs final : public recipe::ChunkLogprobsSource {
 public:
  // `top`: top_logprobs entries per token (Chat: top_logprobs; Completions: logprobs = N).
  TokenLogprobs(const tokenizer::Tokenizer& tokenizer, LogprobsFormat format, int top);

  void add(const engine::SampleResult& sample) { pending_.push_back(sample); }
  // The JSON of the tokens added since the last call ("" when there are none); valid until the
  // next call. Completions `text_offset` continues across calls.
  std::string_view next_chunk_logprobs() override;

 private:
  void write_chat();
  void write_completions();

  const tokenizer::Tokenizer& tokenizer_;
  LogprobsFormat format_;
  int top_;
  std::vector<engine::SampleResult> pending_;
  std::string out_;
  std::string token_text_;
  std::vector<std::string> key_store_;  // Completions top_logprobs keys of one token (dedup)
  int64_t text_offset_ = 0;             // code points of the completion text written so far
};

// `s` with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD.
void append_valid_utf8(std::string& out, std::string_view s);

// One Chat / Responses entry `{"token","logprob","bytes","top_logprobs":[{"token","logprob",
// "bytes"}…]}` with min(top, sample.num_top) alternatives; `scratch` holds the token text.
void append_logprob_entry(std::string& out, const tokenizer::Tokenizer& tokenizer,
                          const engine::SampleResult& sample, int top, std::string& scratch);

}  // namespace deepinfer::server
