// Complete (non-streaming) responses (api spec §1, §7–§9): each accumulator is an EventSink that
// is fed every event of the same protocol's generator (stream_events.h) and rebuilds the
// `chat.completion` object, the Responses response object or the Messages message object.
// Accumulation may allocate (it parses each event); it is not the streaming hot path.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "recipe/conversation.h"
#include "recipe/stream_events.h"

namespace deepinfer::recipe {

class ResponseAccumulator : public EventSink {
 public:
  // The complete response object in the spec's field order.
  virtual Json response() const = 0;
  // Its compact JSON text (reference number format, see json_writer.h).
  std::string response_text() const;
};

class ChatResponseAccumulator final : public ResponseAccumulator {
 public:
  ChatResponseAccumulator(std::string id, std::string model, int64_t created);
  void on_event(std::string_view name, std::string_view data) override;
  Json response() const override;

 private:
  struct ToolCall {
    std::string id, type, name, arguments;
  };
  struct Choice {
    int64_t index = 0;
    std::optional<std::string> content;
    std::optional<std::string> reasoning_content;
    std::vector<ToolCall> tool_calls;
    Json finish_reason;  // null until set
  };
  Choice& choice(int64_t index);

  std::string id_, model_;
  int64_t created_;
  Json system_fingerprint_;
  std::vector<Choice> choices_;
  std::optional<Json> usage_;
};

class ResponsesResponseAccumulator final : public ResponseAccumulator {
 public:
  ResponsesResponseAccumulator(std::string id, std::string model, int64_t created);
  void on_event(std::string_view name, std::string_view data) override;
  Json response() const override { return response_; }

 private:
  JsonObject* item(const JsonObject& event);
  JsonObject* part(const JsonObject& event, std::string_view part_type);

  Json response_;
};

class MessagesResponseAccumulator final : public ResponseAccumulator {
 public:
  MessagesResponseAccumulator(std::string id, std::string model);
  void on_event(std::string_view name, std::string_view data) override;
  Json response() const override { return message_; }

 private:
  Json message_;
  std::map<int64_t, std::string> partial_inputs_;
};

std::unique_ptr<ResponseAccumulator> make_response_accumulator(Protocol protocol, std::string id,
                                                               std::string model, int64_t created);

}  // namespace deepinfer::recipe
