// Legacy OpenAI Completions (`POST /v1/completions`): a raw prompt (text or token ids) in, plain
// text out. The recipe's StreamProcessor still does stop sequences (no reasoning, no tool
// parsing); this generator writes `text_completion` chunks or the complete object.
#pragma once

#include <string>

#include "recipe/json_writer.h"
#include "recipe/output_parser.h"
#include "recipe/stream_events.h"

namespace deepinfer::server {

class CompletionEventGenerator final : public recipe::OutputSink {
 public:
  // With `stream`, every Raw chunk becomes one chunk event on `sink`; otherwise the text is
  // collected and the complete object is one event at Finish. `options.choice_index`,
  // `usage_on_finish` and `chunk_logprobs` (the `logprobs` of each chunk) work as for Chat.
  CompletionEventGenerator(recipe::EventOptions options, bool stream, recipe::EventSink& sink);
  void on_output(const recipe::OutputChunk& chunk) override;

 private:
  void write_chunk(std::string_view text, std::string_view finish_reason,
                   const recipe::Usage* usage);

  recipe::EventOptions options_;
  bool stream_;
  recipe::EventSink& sink_;
  std::string prefix_;
  std::string buf_;
  std::string text_;  // non-stream: the whole text
};

// `"usage":{"prompt_tokens":…,"completion_tokens":…,"total_tokens":…}` of the legacy API.
void write_completion_usage(recipe::JsonWriter& w, const recipe::Usage& usage);

// "stop" / "length" for the legacy API.
std::string_view completion_finish_reason(recipe::FinishReason reason);

}  // namespace deepinfer::server
