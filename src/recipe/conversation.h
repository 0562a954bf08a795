// The unified Conversation that all three APIs convert into (encoding spec §2, api spec §2),
// plus the options that travel with it. Plain data: adapters (convert_*.cpp) fill it, the
// encoders (render.h) read it, the output side (output_parser.h, stream_events.h) reads the
// parsing options. JSON values keep key order and the int/float distinction (Boost.JSON).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"

namespace deepinfer::recipe {

enum class ReasoningEffort { Low, High, Xhigh, Max };
enum class ToolChoice { Auto, None, Required };
enum class ResponseFormat { Text, JsonObject };
enum class ImageDetail { Low, High, Original, Auto };

struct ImageSource {
  enum class Kind { DataUrl, Url, Bytes };
  Kind kind = Kind::Url;
  std::string data;        // the data URL, the http(s) URL, or the base64 payload (Bytes)
  std::string media_type;  // Bytes only: image/png, image/jpeg, ...
  ImageDetail detail = ImageDetail::High;
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text as received (may be invalid)
};

struct ToolDefinition {
  std::string name;
  std::optional<std::string> description;
  Json parameters;  // key order preserved; {} when the request had none
  std::optional<bool> strict;
};

enum class Role { System, User, Assistant, Tool, LatestReminder };

struct Message {
  Role role = Role::User;
  std::string content;                     // User/Tool content already holds one <｜image｜> per image
  std::string reasoning_content;           // Assistant only; "" = none
  std::vector<ToolCall> tool_calls;        // Assistant only
  std::vector<ImageSource> image_sources;  // User and Tool only
  std::string tool_call_id;                // Tool only
};

struct Conversation {
  std::vector<Message> messages;
  bool thinking_mode = true;
  std::vector<ToolDefinition> tools;  // declaration order
  ToolChoice tool_choice = ToolChoice::Auto;
  std::optional<ReasoningEffort> reasoning_effort;  // only meaningful with thinking_mode
  ResponseFormat response_format = ResponseFormat::Text;
};

// Output parser configuration (encoding spec §4.1).
enum class ReasoningInitialStage { None, Start, Reasoning, Content };

struct ParsingOptions {
  bool parse_tool_calls = true;
  bool tool_call_initial_stage = false;
  bool parse_json_output = false;
  ReasoningInitialStage reasoning_initial_stage = ReasoningInitialStage::None;
  std::vector<std::string> stop_sequences;  // empty strings removed
  // Recipe 0.1.x argument labels (`{`, `, `, `: `, names emitted with their quotes), for
  // byte-exact comparison with 0.1.x stream goldens (encoding spec §4.3 "Older label set").
  bool legacy_argument_labels = false;
};

// Pass-through values for the backend (api spec §2). temperature/top_p are f32 as in recipe.
struct InferenceOptions {
  std::optional<int64_t> max_tokens;
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int64_t> thinking_budget_tokens;
  std::optional<bool> disable_parallel_tool_use;
};

enum class Protocol { ChatCompletions, Responses, Messages };

struct ConversationRequest {
  Conversation conversation;
  InferenceOptions inference_options;
  ParsingOptions parsing_options;
  std::string model;
  bool stream = false;
  bool include_usage = false;             // Chat: stream_options.include_usage (true when not streaming)
  std::vector<std::string> custom_tool_names;  // Responses: declared `custom` tools
};

enum class WebSearchPolicy { Ignore, Reject };

struct ConversionOptions {
  bool default_thinking_mode = true;
  WebSearchPolicy responses_web_search = WebSearchPolicy::Ignore;
  WebSearchPolicy messages_web_search = WebSearchPolicy::Reject;
};

struct ConversionError {
  enum class Kind { BadRequest, Internal };
  Kind kind = Kind::BadRequest;
  std::string detail;  // the exact detail string of the api spec
};

}  // namespace deepinfer::recipe
