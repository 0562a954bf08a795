// OutputChunks → the streaming events of each API (api spec §6–§9): Chat Completions chunks,
// Responses events and Messages events, each written as the JSON text of one SSE `data:` line
// with the spec's field order. Generators are OutputSinks; building an event allocates nothing
// once the reused buffers have grown. The complete responses (complete_response.h) accumulate
// these same events.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recipe/conversation.h"
#include "recipe/output_chunk.h"
#include "recipe/output_parser.h"
#include "recipe/stream_events_custom_input.h"

namespace deepinfer::recipe {

class EventSink {
 public:
  virtual ~EventSink() = default;
  // `name`: the SSE event name (Responses/Messages: the event type; Chat Completions: "").
  // `data`: the JSON text of the data line. Both are valid only during this call.
  virtual void on_event(std::string_view name, std::string_view data) = 0;
};

// Chat: the `logprobs` value of each chunk, supplied by the caller (stream logprobs). Returns
// the JSON text of the value, or "" for null; called once per chunk, in emission order.
class ChunkLogprobsSource {
 public:
  virtual ~ChunkLogprobsSource() = default;
  virtual std::string_view next_chunk_logprobs() = 0;
};

// Responses: the `logprobs` entries of each output_text delta, supplied by the caller. Returns
// the JSON text of the entries for the tokens behind `delta` (objects joined with ",", "" for
// none); called once per output_text delta, in emission order. Reasoning text never asks.
class TextLogprobsSource {
 public:
  virtual ~TextLogprobsSource() = default;
  virtual std::string_view output_text_logprobs(std::string_view delta) = 0;
};

struct EventOptions {
  std::string id;                       // response id; item, call and tool-use ids derive from it
  std::string model;                    // public model name echoed in every response
  int64_t created = 0;                  // unix seconds (Chat `created`, Responses `created_at`)
  std::optional<int64_t> completed_at;  // Responses `completed_at`; default: the clock at Finish
  bool thinking_mode = true;            // Chat delta shapes, Messages initial thinking block
  bool include_usage = false;           // Chat: `"usage":null` on non-final chunks
  std::vector<std::string> custom_tool_names;  // Responses: calls emitted as custom_tool_call
  std::optional<std::string> signature;        // Messages thinking signature; default: id
  // Chat, one stream carrying several choices (n > 1): this generator's `choices[].index`, and
  // whether its finish chunk carries the usage object (false: `"usage":null` with
  // include_usage, omitted otherwise; the caller sends one usage chunk for all choices).
  int64_t choice_index = 0;
  bool usage_on_finish = true;
  ChunkLogprobsSource* chunk_logprobs = nullptr;  // Chat: null → every chunk has "logprobs":null
  TextLogprobsSource* text_logprobs = nullptr;    // Responses: null → every "logprobs" is []
};

// The Chat usage object of api spec §6 (`{"prompt_tokens":…,"prompt_cache_miss_tokens":…}`).
void append_chat_usage(std::string& out, const Usage& usage);

// Mappings of the shared finish reason (api spec §6).
std::string_view chat_finish_reason(FinishReason reason);
std::string_view messages_stop_reason(FinishReason reason);

class ChatEventGenerator final : public OutputSink {
 public:
  ChatEventGenerator(EventOptions options, EventSink& sink);
  void on_output(const OutputChunk& chunk) override;

 private:
  void render_prefix(const std::optional<std::string>* fingerprint);
  void emit(std::string_view delta, std::string_view finish_reason, const Usage* usage);

  EventOptions options_;
  EventSink& sink_;
  std::string prefix_;  // `{"id":…,"choices":[{"index":0,"delta":`
  std::string buf_;
  std::string delta_;
  Usage prompt_usage_;
  int64_t tool_calls_ = 0;
};

class ResponsesEventGenerator final : public OutputSink {
 public:
  ResponsesEventGenerator(EventOptions options, EventSink& sink);
  void on_output(const OutputChunk& chunk) override;

 private:
  enum class ItemKind { Reasoning, Message, FunctionCall, CustomToolCall };
  struct Item {
    ItemKind kind = ItemKind::Message;
    std::string id;
    std::string_view status = "in_progress";
    bool commentary = false;  // message phase
    std::string text;         // reasoning/message text, function arguments, custom input
    std::string logprobs;     // message: the output_text logprobs entries, joined with ","
    std::string call_id;
    std::string name;
    std::string ns;  // function namespace ("" = none)
    bool has_namespace = false;
  };

  void append_text(std::string_view delta, bool reasoning);
  void start_tool_call(std::string_view name);
  void append_arguments(std::string_view delta);
  void append_custom_input(size_t index, std::string_view delta);
  void open_item(Item item);
  void close_item(std::string_view status);
  void finish(const OutputChunk& chunk);

  void begin_event(std::string_view type);
  void end_event();
  void write_item(const Item& item, bool with_content);
  void write_part(const Item& item);
  void write_response();
  void write_index_fields(const Item& item, size_t index);  // "item_id","output_index"

  EventOptions options_;
  EventSink& sink_;
  std::string buf_;
  std::string_view event_type_;
  std::vector<Item> output_;
  std::optional<size_t> active_;
  CustomToolInputDecoder custom_input_;
  bool custom_active_ = false;
  std::string decoded_;
  int64_t sequence_ = 0;
  int64_t tool_calls_ = 0;
  Usage prompt_usage_;
  Usage final_usage_;
  std::string_view status_ = "in_progress";
  std::string_view incomplete_reason_;
  std::optional<int64_t> completed_at_;
  bool started_ = false;
  bool finished_ = false;
};

class MessagesEventGenerator final : public OutputSink {
 public:
  MessagesEventGenerator(EventOptions options, EventSink& sink);
  void on_output(const OutputChunk& chunk) override;

 private:
  enum class Block { None, Thinking, Text, ToolUse };
  void open_block(Block kind, std::string_view tool_name);
  void close_block();
  void delta(std::string_view type, std::string_view field, std::string_view text);
  void emit(std::string_view type);
  void write_usage(const Usage& prompt, int64_t completion_tokens);

  EventOptions options_;
  EventSink& sink_;
  std::string buf_;
  Block active_ = Block::None;
  int64_t index_ = 0;
  int64_t tool_calls_ = 0;
  Usage prompt_usage_;
  bool started_ = false;
  bool finished_ = false;
};

// The generator of `protocol`, writing into `sink` (which must outlive it).
std::unique_ptr<OutputSink> make_event_generator(Protocol protocol, EventOptions options,
                                                 EventSink& sink);

}  // namespace deepinfer::recipe
