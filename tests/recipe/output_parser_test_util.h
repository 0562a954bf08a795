// Test helpers for the output parser: a sink that records OutputChunks (owning their text), a
// driver that feeds text chunks through a StreamProcessor, and the per-kind concatenations.
#pragma once

#include <algorithm>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "recipe/output_parser.h"

namespace deepinfer::recipe::testing {

struct Event {
  OutputChunk::Kind kind = OutputChunk::Kind::Raw;
  std::string text;
  bool has_fingerprint_ptr = false;
  std::optional<std::string> fingerprint;
  Usage usage;
  FinishReason reason = FinishReason::Stop;
  std::string stop_sequence;
};

class Recorder : public OutputSink {
 public:
  void on_output(const OutputChunk& chunk) override {
    Event e;
    e.kind = chunk.kind;
    e.text = std::string(chunk.text);
    e.has_fingerprint_ptr = chunk.system_fingerprint != nullptr;
    if (chunk.system_fingerprint) e.fingerprint = *chunk.system_fingerprint;
    e.usage = chunk.usage;
    e.reason = chunk.finish_reason;
    e.stop_sequence = std::string(chunk.stop_sequence);
    events.push_back(std::move(e));
  }
  std::vector<Event> events;
};

inline bool operator==(const Usage& a, const Usage& b) {
  return a.prompt_tokens == b.prompt_tokens && a.completion_tokens == b.completion_tokens &&
         a.prompt_cache_hit_tokens == b.prompt_cache_hit_tokens;
}

struct ToolCallOut {
  std::string name;
  std::string arguments;
  bool named = false;  // a ToolCall chunk (the name) was emitted
  bool operator==(const ToolCallOut&) const = default;
};

// The concatenation of each output kind; equal for every split of the same output.
struct Parsed {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallOut> tool_calls;
  bool finished = false;
  FinishReason reason = FinishReason::Stop;
  std::string stop_sequence;
  Usage usage;
  int starts = 0;
  bool operator==(const Parsed&) const = default;
};

inline void PrintTo(const Parsed& p, std::ostream* os) {
  *os << "{reasoning=\"" << p.reasoning << "\" content=\"" << p.content << "\" tools=[";
  for (const ToolCallOut& t : p.tool_calls)
    *os << t.name << (t.named ? "" : "?") << t.arguments << " ";
  *os << "] finished=" << p.finished << " reason=" << static_cast<int>(p.reason) << " stop=\""
      << p.stop_sequence << "\" starts=" << p.starts << "}";
}

inline Parsed aggregate(const std::vector<Event>& events) {
  Parsed p;
  for (const Event& e : events) {
    switch (e.kind) {
      case OutputChunk::Kind::Start:
        ++p.starts;
        break;
      case OutputChunk::Kind::Raw:
        p.content += e.text;
        break;
      case OutputChunk::Kind::Reasoning:
        p.reasoning += e.text;
        break;
      case OutputChunk::Kind::ToolCallBegin:
        p.tool_calls.emplace_back();
        break;
      case OutputChunk::Kind::ToolCall:
        if (p.tool_calls.empty()) p.tool_calls.emplace_back();  // would be a bug; keep visible
        p.tool_calls.back().name = e.text;
        p.tool_calls.back().named = true;
        break;
      case OutputChunk::Kind::ToolArgumentsDelta:
        if (p.tool_calls.empty()) p.tool_calls.emplace_back();
        p.tool_calls.back().arguments += e.text;
        break;
      case OutputChunk::Kind::Finish:
        p.finished = true;
        p.reason = e.reason;
        p.stop_sequence = e.stop_sequence;
        p.usage = e.usage;
        break;
    }
  }
  return p;
}

inline const char* reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop:
      return "stop";
    case FinishReason::EndOfStream:
      return "end_of_stream";
    case FinishReason::StopSequence:
      return "stop_sequence";
    case FinishReason::ToolCalls:
      return "tool_calls";
    case FinishReason::Length:
      return "length";
    case FinishReason::ContentFilter:
      return "content_filter";
  }
  return "?";
}

// One line per chunk: "Start", "Raw:text", "Reasoning:text", "Begin", "Call:name", "Δtext",
// "Finish:reason".
inline std::vector<std::string> describe(const std::vector<Event>& events) {
  std::vector<std::string> out;
  for (const Event& e : events) {
    switch (e.kind) {
      case OutputChunk::Kind::Start:
        out.push_back("Start");
        break;
      case OutputChunk::Kind::Raw:
        out.push_back("Raw:" + e.text);
        break;
      case OutputChunk::Kind::Reasoning:
        out.push_back("Reasoning:" + e.text);
        break;
      case OutputChunk::Kind::ToolCallBegin:
        out.push_back("Begin");
        break;
      case OutputChunk::Kind::ToolCall:
        out.push_back("Call:" + e.text);
        break;
      case OutputChunk::Kind::ToolArgumentsDelta:
        out.push_back("Δ" + e.text);
        break;
      case OutputChunk::Kind::Finish:
        out.push_back(std::string("Finish:") + reason_name(e.reason));
        break;
    }
  }
  return out;
}

// Feeds `chunks` as Text chunks (1 token each), then `finish` (or end_of_stream when empty).
inline std::vector<Event> run_chunks(const ParsingOptions& options,
                                     const std::vector<std::string>& chunks,
                                     std::optional<BackendFinish> finish = BackendFinish::Stop) {
  StreamProcessor processor(options);
  Recorder rec;
  for (const std::string& c : chunks) {
    InferenceChunk chunk;
    chunk.kind = InferenceChunk::Kind::Text;
    chunk.content = c;
    chunk.content_tokens = 1;
    if (!processor.process(chunk, rec)) break;
  }
  if (finish) {
    InferenceChunk f;
    f.kind = InferenceChunk::Kind::Finish;
    f.finish = *finish;
    processor.process(f, rec);
  } else {
    processor.end_of_stream(rec);
  }
  return rec.events;
}

inline Parsed parse(const ParsingOptions& options, const std::vector<std::string>& chunks,
                    std::optional<BackendFinish> finish = BackendFinish::Stop) {
  return aggregate(run_chunks(options, chunks, finish));
}

inline Parsed parse(const ParsingOptions& options, std::string_view text,
                    std::optional<BackendFinish> finish = BackendFinish::Stop) {
  return parse(options, std::vector<std::string>{std::string(text)}, finish);
}

// Cuts `text` at the given ascending byte offsets.
inline std::vector<std::string> split_at(std::string_view text, const std::vector<size_t>& cuts) {
  std::vector<std::string> out;
  size_t from = 0;
  for (size_t cut : cuts) {
    out.emplace_back(text.substr(from, cut - from));
    from = cut;
  }
  out.emplace_back(text.substr(from));
  return out;
}

// k-1 random cut points (duplicates allowed: empty chunks are legal input).
inline std::vector<std::string> random_split(std::string_view text, size_t k, std::mt19937& rng) {
  std::vector<size_t> cuts;
  std::uniform_int_distribution<size_t> pos(0, text.size());
  for (size_t i = 1; i < k; ++i) cuts.push_back(pos(rng));
  std::sort(cuts.begin(), cuts.end());
  return split_at(text, cuts);
}

inline std::vector<std::string> bytewise(std::string_view text) {
  std::vector<std::string> out;
  for (char c : text) out.emplace_back(1, c);
  return out;
}

inline ParsingOptions non_thinking(bool tools = false) {
  ParsingOptions o;
  o.parse_tool_calls = tools;
  o.reasoning_initial_stage = ReasoningInitialStage::None;
  return o;
}

inline ParsingOptions thinking(bool tools = false) {
  ParsingOptions o = non_thinking(tools);
  o.reasoning_initial_stage = ReasoningInitialStage::Start;
  return o;
}

}  // namespace deepinfer::recipe::testing
