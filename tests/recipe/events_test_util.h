// Test helpers for the stream event generators: a recording EventSink and the OutputChunk
// sequence of the api spec §10 worked example (reasoning + text + two tool calls).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "recipe/output_chunk.h"
#include "recipe/stream_events.h"

namespace deepinfer::recipe::testing {

struct RecordingSink final : EventSink {
  std::vector<std::pair<std::string, std::string>> events;
  void on_event(std::string_view name, std::string_view data) override {
    events.emplace_back(std::string(name), std::string(data));
  }
  std::vector<std::string> data() const {
    std::vector<std::string> out;
    for (const auto& e : events) out.push_back(e.second);
    return out;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : events) out.push_back(e.first);
    return out;
  }
};

// Owns the strings the OutputChunk views point at; views are bound when the script runs.
struct ChunkScript {
  std::optional<std::string> fingerprint;
  std::vector<std::string> texts;
  std::vector<OutputChunk> chunks;
  std::vector<size_t> text_of;  // per chunk: index into texts (SIZE_MAX: none)
  ChunkScript& start(std::optional<std::string> fp, int64_t prompt, int64_t hit) {
    fingerprint = std::move(fp);
    OutputChunk c;
    c.kind = OutputChunk::Kind::Start;
    c.system_fingerprint = &fingerprint;
    c.usage.prompt_tokens = prompt;
    c.usage.prompt_cache_hit_tokens = hit;
    chunks.push_back(c);
    text_of.push_back(SIZE_MAX);
    return *this;
  }
  ChunkScript& add(OutputChunk::Kind kind, std::string text = {}) {
    texts.push_back(std::move(text));
    OutputChunk c;
    c.kind = kind;
    chunks.push_back(c);
    text_of.push_back(texts.size() - 1);
    return *this;
  }
  ChunkScript& reasoning(std::string t) { return add(OutputChunk::Kind::Reasoning, std::move(t)); }
  ChunkScript& raw(std::string t) { return add(OutputChunk::Kind::Raw, std::move(t)); }
  ChunkScript& tool(std::string name) {
    add(OutputChunk::Kind::ToolCallBegin);
    return add(OutputChunk::Kind::ToolCall, std::move(name));
  }
  ChunkScript& args(std::initializer_list<const char*> deltas) {
    for (const char* d : deltas) add(OutputChunk::Kind::ToolArgumentsDelta, d);
    return *this;
  }
  ChunkScript& finish(FinishReason reason, int64_t prompt, int64_t completion, int64_t hit,
                      std::string stop_sequence = {}) {
    texts.push_back(std::move(stop_sequence));
    OutputChunk c;
    c.kind = OutputChunk::Kind::Finish;
    c.finish_reason = reason;
    c.usage = {prompt, completion, hit};
    chunks.push_back(c);
    text_of.push_back(texts.size() - 1);
    return *this;
  }
  void run(OutputSink& sink) const {
    for (size_t i = 0; i < chunks.size(); ++i) {
      OutputChunk c = chunks[i];
      if (c.kind == OutputChunk::Kind::Start) c.system_fingerprint = &fingerprint;
      if (text_of[i] != SIZE_MAX) {
        if (c.kind == OutputChunk::Kind::Finish) {
          c.stop_sequence = texts[text_of[i]];
        } else {
          c.text = texts[text_of[i]];
        }
      }
      sink.on_output(c);
    }
  }
};

// §10: Ready{fp-1, 100, 0}, one Text chunk of 40 tokens, Finish{stop} → tool_calls.
inline ChunkScript worked_example() {
  ChunkScript s;
  s.start("fp-1", 100, 0)
      .reasoning("Let me check both.")
      .raw("I'll look them up.")
      .tool("get_weather")
      .args({"{\"", "city", "\": ", "\"", "Paris", "\"", "}"})
      .tool("get_time")
      .args({"{\"", "tz", "\": ", "\"", "CET", "\"", "}"})
      .finish(FinishReason::ToolCalls, 100, 40, 0);
  return s;
}

inline EventOptions example_options() {
  EventOptions o;
  o.id = "resp-1";
  o.model = "deepseek-flash";
  o.created = 1700000000;
  o.completed_at = 1700000005;
  o.thinking_mode = true;
  return o;
}

}  // namespace deepinfer::recipe::testing
