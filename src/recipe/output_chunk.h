// What flows on the output side (api spec §1, §6): backend InferenceChunks go into the
// StreamProcessor (output_parser.h), typed OutputChunks come out and go into the per-API event
// generators (stream_events.h). Text is a view: valid only during the callback that receives it,
// so the hot path never allocates per token.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace deepinfer::recipe {

enum class BackendFinish { Stop, Length, ContentFilter };

struct InferenceChunk {
  enum class Kind { Ready, Text, Finish };
  Kind kind = Kind::Text;
  // Ready
  std::optional<std::string> system_fingerprint;
  int64_t prompt_tokens = 0;
  int64_t prompt_cache_hit_tokens = 0;
  // Text
  std::string_view content;
  int64_t content_tokens = 0;
  // Finish
  BackendFinish finish = BackendFinish::Stop;
};

// Shared finish reason (api spec §6) before mapping to each API's own value.
enum class FinishReason { Stop, EndOfStream, StopSequence, ToolCalls, Length, ContentFilter };

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t prompt_cache_hit_tokens = 0;
};

struct OutputChunk {
  enum class Kind { Start, Raw, Reasoning, ToolCallBegin, ToolCall, ToolArgumentsDelta, Finish };
  Kind kind = Kind::Raw;
  std::string_view
      text;  // Raw/Reasoning: the text; ToolCall: the name; ToolArgumentsDelta: the delta
  // Start and Finish
  const std::optional<std::string>* system_fingerprint = nullptr;  // Start: may be null/empty
  Usage usage;  // Start: prompt side; Finish: all
  // Finish
  FinishReason finish_reason = FinishReason::Stop;
  std::string_view stop_sequence;  // Finish with StopSequence: the matched text
};

}  // namespace deepinfer::recipe
