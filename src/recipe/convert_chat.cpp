// OpenAI Chat Completions request → ConversationRequest (api spec §3, §3.1).
#include <set>

#include "recipe/convert_common.h"

namespace deepinfer::recipe::convert {
namespace {

using Content = ContentParts;

// One block of a Chat content array: text, image_url or file.
Failure chat_block(const JsonObject& block, const std::string& type, const std::string& block_path,
                   Content& piece) {
  if (type == "text") {
    DEEPINFER_CONVERT_TRY(read_required_string(block, "text", block_path, piece.text));
  } else if (type == "image_url") {
    const JsonObject* image = nullptr;
    DEEPINFER_CONVERT_TRY(read_object(block, "image_url", block_path, image));
    if (image == nullptr) return missing_field(block_path, "image_url");
    std::string image_path = block_path + ".image_url";
    std::string url;
    DEEPINFER_CONVERT_TRY(read_required_string(*image, "url", image_path, url));
    ImageDetail detail = ImageDetail::High;
    DEEPINFER_CONVERT_TRY(read_image_detail(*image, image_path, detail));
    Conv<ImageSource> source = image_url_source(url, detail, image_path + ".url");
    if (!source.ok()) return source.error();
    piece.images.push_back(std::move(source.value()));
    piece.text = kImagePlaceholder;
  } else if (type == "file") {
    // file_data / file_id are read from the block itself or from a nested "file" object
    // (the OpenAI shape); filename is accepted and ignored.
    const JsonObject* file = nullptr;
    DEEPINFER_CONVERT_TRY(read_object(block, "file", block_path, file));
    const JsonObject& fields = file != nullptr ? *file : block;
    std::string fields_path = file != nullptr ? block_path + ".file" : block_path;
    std::optional<std::string> file_id;
    std::optional<std::string> file_data;
    DEEPINFER_CONVERT_TRY(read_string(fields, "file_id", fields_path, file_id));
    DEEPINFER_CONVERT_TRY(read_string(fields, "file_data", fields_path, file_data));
    if (file_id) return file_id_unsupported(block_path);
    if (!file_data) return bad_request(block_path + ": file must have file_data");
    piece.images.push_back(
        ImageSource{ImageSource::Kind::DataUrl, std::move(*file_data), "", ImageDetail::High});
    piece.text = kImagePlaceholder;
  } else {
    return unknown_variant(block_path, type, {"text", "image_url", "file"});
  }
  return std::nullopt;
}

// `prefix` is the message path ("messages[2]"); block paths are "<prefix>.content[j]".
Conv<Content> chat_content(const Json& value, const std::string& prefix,
                           const std::string& value_path) {
  return read_content(value, value_path, "expected a string or an array of content blocks",
                      prefix + ".content", chat_block);
}

// Text-only content (system, assistant): images are rejected with the role's error.
Conv<std::string> chat_text(const Json& value, const std::string& prefix,
                            const std::string& value_path, std::string_view role) {
  Conv<Content> content = chat_content(value, prefix, value_path);
  if (!content.ok()) return content.error();
  if (!content.value().images.empty()) return image_not_allowed(role);
  return std::move(content.value().text);
}

constexpr const char* kInsufficientToolMessages =
    "An assistant message with 'tool_calls' must be followed by tool messages responding to "
    "each 'tool_call_id'. (insufficient tool messages following tool_calls message)";

Failure read_tool_calls(const JsonArray& calls, const std::string& path, size_t index,
                        std::vector<ToolCall>& out) {
  std::set<std::string> ids;
  for (size_t j = 0; j < calls.size(); ++j) {
    std::string call_path = index_path(path + ".tool_calls", j);
    const JsonObject* call = nullptr;
    DEEPINFER_CONVERT_TRY(expect_object(calls[j], call_path, call));
    ToolCall tool_call;
    DEEPINFER_CONVERT_TRY(read_required_string(*call, "id", call_path, tool_call.id));
    const JsonObject* function = nullptr;
    DEEPINFER_CONVERT_TRY(read_object(*call, "function", call_path, function));
    if (function == nullptr) return missing_field(call_path, "function");
    std::string function_path = call_path + ".function";
    DEEPINFER_CONVERT_TRY(read_required_string(*function, "name", function_path, tool_call.name));
    DEEPINFER_CONVERT_TRY(
        read_required_string(*function, "arguments", function_path, tool_call.arguments));
    if (!ids.insert(tool_call.id).second) {
      return bad_request("Duplicate value for 'tool_call_id' of " + tool_call.id + " in message[" +
                         std::to_string(index) + "]");
    }
    out.push_back(std::move(tool_call));
  }
  return std::nullopt;
}

Failure read_role(const JsonObject& message, const std::string& path, std::string& role) {
  DEEPINFER_CONVERT_TRY(read_required_string(message, "role", path, role));
  if (role == "system" || role == "user" || role == "assistant" || role == "tool" ||
      role == "latest_reminder") {
    return std::nullopt;
  }
  return unknown_variant(path, role, {"system", "user", "assistant", "tool", "latest_reminder"});
}

Failure transform_messages(const JsonArray& messages, std::vector<Message>& out) {
  if (messages.empty()) return bad_request("Empty input messages");
  for (size_t index = 0; index < messages.size(); ++index) {
    std::string path = index_path("messages", index);
    const JsonObject* message = nullptr;
    DEEPINFER_CONVERT_TRY(expect_object(messages[index], path, message));
    std::string role;
    DEEPINFER_CONVERT_TRY(read_role(*message, path, role));
    const Json* content = find_field(*message, "content");
    std::string content_path = path + ".content";
    if (role != "assistant" && content == nullptr) return missing_field(path, "content");

    if (role == "system") {
      Conv<std::string> text = chat_text(*content, path, content_path, "system");
      if (!text.ok()) return text.error();
      if (!text.value().empty()) out.push_back(make_message(Role::System, std::move(text.value())));
    } else if (role == "user") {
      Conv<Content> converted = chat_content(*content, path, content_path);
      if (!converted.ok()) return converted.error();
      out.push_back(make_message(Role::User, std::move(converted.value().text),
                                 std::move(converted.value().images)));
    } else if (role == "latest_reminder") {
      if (!content->is_string()) return bad_request(content_path + ": expected a string");
      out.push_back(make_message(Role::LatestReminder, std::string(content->get_string())));
    } else if (role == "tool") {
      return bad_request(
          "Messages with role 'tool' must be a response to a preceding message with "
          "'tool_calls'");
    } else {  // assistant
      const JsonArray* calls = nullptr;
      DEEPINFER_CONVERT_TRY(read_array(*message, "tool_calls", path, calls));
      if (content == nullptr && calls == nullptr) {
        return bad_request("Invalid assistant message: content or tool_calls must be set");
      }
      Message assistant = make_message(Role::Assistant, "");
      if (content != nullptr) {
        Conv<std::string> text = chat_text(*content, path, content_path, "assistant");
        if (!text.ok()) return text.error();
        assistant.content = std::move(text.value());
      }
      std::optional<std::string> reasoning;
      DEEPINFER_CONVERT_TRY(read_string(*message, "reasoning_content", path, reasoning));
      if (reasoning) assistant.reasoning_content = std::move(*reasoning);
      std::vector<Message> tool_results;
      if (calls != nullptr) {
        if (calls->empty()) {
          return bad_request("Invalid '" + path +
                             ".tool_calls': empty array. Expected an array with minimum length "
                             "1, but got an empty array instead.");
        }
        DEEPINFER_CONVERT_TRY(read_tool_calls(*calls, path, index, assistant.tool_calls));
        std::set<std::string> ids;
        for (const ToolCall& call : assistant.tool_calls) ids.insert(call.id);
        std::set<std::string> answered;
        for (size_t k = 0; k < assistant.tool_calls.size(); ++k) {
          ++index;
          if (index >= messages.size()) return bad_request(kInsufficientToolMessages);
          std::string tool_path = index_path("messages", index);
          const JsonObject* tool = nullptr;
          DEEPINFER_CONVERT_TRY(expect_object(messages[index], tool_path, tool));
          std::string tool_role;
          DEEPINFER_CONVERT_TRY(read_role(*tool, tool_path, tool_role));
          if (tool_role != "tool") return bad_request(kInsufficientToolMessages);
          std::string call_id;
          DEEPINFER_CONVERT_TRY(read_required_string(*tool, "tool_call_id", tool_path, call_id));
          const Json* tool_content = find_field(*tool, "content");
          if (tool_content == nullptr) return missing_field(tool_path, "content");
          if (ids.count(call_id) == 0) {
            return bad_request(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. Unexpected tool_call_id: " +
                call_id);
          }
          if (!answered.insert(call_id).second) {
            return bad_request("Duplicate value for 'tool_call_id' of " + call_id + " in message[" +
                               std::to_string(index) + "]");
          }
          // The reference adapter prefixes tool-result block paths with
          // "messages[i].content" (so images read "messages[i].content.content[j]...").
          Conv<Content> converted =
              chat_content(*tool_content, tool_path + ".content", tool_path + ".content");
          if (!converted.ok()) return converted.error();
          tool_results.push_back(make_message(Role::Tool, std::move(converted.value().text),
                                              std::move(converted.value().images),
                                              std::move(call_id)));
        }
      }
      out.push_back(std::move(assistant));
      for (Message& result : tool_results) out.push_back(std::move(result));
    }
  }
  return std::nullopt;
}

struct Thinking {
  bool on = true;
  std::optional<ReasoningEffort> effort;
};

Failure resolve_thinking(const JsonObject& body, const ConversionOptions& options, Thinking& out) {
  std::optional<std::string> effort_name;
  DEEPINFER_CONVERT_TRY(read_string(body, "reasoning_effort", "", effort_name));
  std::optional<OpenAiEffort> effort;
  if (effort_name) {
    effort = openai_effort(*effort_name);
    if (!effort) {
      return unknown_variant("reasoning_effort", *effort_name,
                             {"none", "minimal", "low", "medium", "high", "xhigh", "max"});
    }
  }
  const JsonObject* thinking = nullptr;
  DEEPINFER_CONVERT_TRY(read_object(body, "thinking", "", thinking));
  std::optional<bool> explicit_switch;
  if (thinking != nullptr) {
    std::string type;
    DEEPINFER_CONVERT_TRY(read_required_string(*thinking, "type", "thinking", type));
    if (type == "enabled" || type == "adaptive") {
      explicit_switch = true;
    } else if (type == "disabled") {
      explicit_switch = false;
    } else {
      return unknown_variant("thinking.type", type, {"enabled", "adaptive", "disabled"});
    }
  }
  // Explicit switch > effort value > default (api spec §2).
  if (explicit_switch) {
    out.on = *explicit_switch;
  } else if (effort) {
    out.on = effort->thinking;
  } else {
    out.on = options.default_thinking_mode;
  }
  out.effort.reset();
  if (out.on) out.effort = (effort && effort->effort) ? *effort->effort : ReasoningEffort::High;
  return std::nullopt;
}

Failure read_inference_options(const JsonObject& body, InferenceOptions& options) {
  std::optional<int64_t> n;
  DEEPINFER_CONVERT_TRY(read_integer(body, "n", "", n));
  if (n && *n != 1) return bad_request("Invalid n value (currently only n = 1 is supported)");
  for (std::string_view name : {"frequency_penalty", "presence_penalty"}) {
    std::optional<double> penalty;
    DEEPINFER_CONVERT_TRY(read_number(body, name, "", penalty));
    if (penalty) {
      float value = static_cast<float>(*penalty);
      if (!(value >= -2.0f && value <= 2.0f)) {
        return bad_request(std::string(name) + " must be in [-2, 2]");
      }
    }
  }
  DEEPINFER_CONVERT_TRY(read_sampling(body, "max_tokens", options));
  if (const Json* seed = find_field(body, "seed")) {
    // seed must be an integer in [0, 2^63); larger values arrive as uint64.
    bool valid = (seed->is_int64() && seed->get_int64() >= 0);
    if (!valid) {
      if (!seed->is_int64() && !seed->is_uint64()) return bad_request("seed: expected an integer");
      return bad_request("seed must be in [0, 2^63)");
    }
  }
  return std::nullopt;
}

Failure read_stop_and_stream(const JsonObject& body, ConversationRequest& request) {
  std::vector<std::string> stop;
  if (const Json* value = find_field(body, "stop")) {
    if (const JsonString* text = value->if_string()) {
      stop.emplace_back(text->data(), text->size());
    } else if (const JsonArray* list = value->if_array()) {
      for (size_t i = 0; i < list->size(); ++i) {
        const JsonString* text = (*list)[i].if_string();
        if (text == nullptr) return bad_request(index_path("stop", i) + ": expected a string");
        stop.emplace_back(text->data(), text->size());
      }
      if (stop.size() > kMaxStopSequences) {
        return bad_request("ChatCompletionStopSequences string array too long: " +
                           std::to_string(stop.size()));
      }
    } else {
      return bad_request("stop: expected a string or an array of strings");
    }
  }
  for (std::string& sequence : stop) {
    if (!sequence.empty()) request.parsing_options.stop_sequences.push_back(std::move(sequence));
  }
  std::optional<bool> stream;
  DEEPINFER_CONVERT_TRY(read_bool(body, "stream", "", stream));
  request.stream = stream.value_or(false);
  const JsonObject* stream_options = nullptr;
  DEEPINFER_CONVERT_TRY(read_object(body, "stream_options", "", stream_options));
  if (stream_options != nullptr && !request.stream) {
    return bad_request("stream_options should be set along with stream = true");
  }
  request.include_usage = true;
  if (request.stream) {
    std::optional<bool> include_usage;
    if (stream_options != nullptr) {
      DEEPINFER_CONVERT_TRY(
          read_bool(*stream_options, "include_usage", "stream_options", include_usage));
    }
    request.include_usage = include_usage.value_or(false);
  }
  return std::nullopt;
}

Failure convert_tools(const JsonObject& body, bool thinking, Conversation& conversation) {
  const JsonArray* tools = nullptr;
  DEEPINFER_CONVERT_TRY(read_array(body, "tools", "", tools));
  std::vector<const JsonObject*> functions;
  if (tools != nullptr) {
    for (size_t i = 0; i < tools->size(); ++i) {
      std::string path = "tools." + std::to_string(i);
      const JsonObject* tool = nullptr;
      DEEPINFER_CONVERT_TRY(expect_object((*tools)[i], path, tool));
      std::optional<std::string> type;
      DEEPINFER_CONVERT_TRY(read_string(*tool, "type", path, type));
      if (type && *type != "function") return unknown_variant(path + ".type", *type, {"function"});
      const JsonObject* function = nullptr;
      DEEPINFER_CONVERT_TRY(read_object(*tool, "function", path, function));
      if (function == nullptr) return missing_field(path, "function");
      std::string name;
      DEEPINFER_CONVERT_TRY(read_required_string(*function, "name", path + ".function", name));
      DEEPINFER_CONVERT_TRY(validate_tool_name(name, path + ".function.name"));
      functions.push_back(function);
    }
  }

  // tool_choice: "none" | "auto" | "required" | {type:"function", function:{name}}.
  std::optional<std::string> mode;
  std::optional<std::string> named;
  if (const Json* choice = find_field(body, "tool_choice")) {
    if (const JsonString* text = choice->if_string()) {
      DEEPINFER_CONVERT_TRY(read_tool_choice_mode(*text, mode));
    } else if (const JsonObject* object = choice->if_object()) {
      const JsonObject* function = nullptr;
      DEEPINFER_CONVERT_TRY(read_object(*object, "function", "tool_choice", function));
      if (function == nullptr) return missing_field("tool_choice", "function");
      std::string name;
      DEEPINFER_CONVERT_TRY(read_required_string(*function, "name", "tool_choice.function", name));
      named = std::move(name);
    } else {
      return bad_request("tool_choice: expected a string or an object");
    }
  }
  if (mode == "none") {
    conversation.tool_choice = ToolChoice::None;
    return std::nullopt;
  }
  conversation.tool_choice = ToolChoice::Auto;
  if (functions.empty()) return std::nullopt;

  std::set<std::string> names;
  for (size_t i = 0; i < functions.size(); ++i) {
    const JsonObject& function = *functions[i];
    std::string path = "tools." + std::to_string(i) + ".function";
    ToolDefinition definition;
    DEEPINFER_CONVERT_TRY(read_required_string(function, "name", path, definition.name));
    if (!names.insert(definition.name).second) return bad_request("Tool names must be unique");
    DEEPINFER_CONVERT_TRY(read_string(function, "description", path, definition.description));
    definition.parameters = JsonObject{};
    if (const Json* parameters = find_field(function, "parameters")) {
      DEEPINFER_CONVERT_TRY(validate_tool_parameters(*parameters, path + ".parameters"));
      definition.parameters = *parameters;
    }
    DEEPINFER_CONVERT_TRY(read_bool(function, "strict", path, definition.strict));
    conversation.tools.push_back(std::move(definition));
  }
  return resolve_tool_choice(mode, named, names, thinking, conversation);
}

Failure convert_response_format(const JsonObject& body, Conversation& conversation) {
  const JsonObject* format = nullptr;
  DEEPINFER_CONVERT_TRY(read_object(body, "response_format", "", format));
  conversation.response_format = ResponseFormat::Text;
  if (format == nullptr) return std::nullopt;
  std::string type;
  DEEPINFER_CONVERT_TRY(read_required_string(*format, "type", "response_format", type));
  if (type == "json_object") {
    if (!contains_json_word(conversation.messages)) {
      return bad_request(
          "Prompt must contain the word 'json' in some form to use 'response_format' of type "
          "'json_object'.");
    }
    conversation.response_format = ResponseFormat::JsonObject;
  } else if (type == "regex") {
    return bad_request("response_format: only text and json_object are supported");
  } else if (type != "text" && type != "json_schema") {
    return unknown_variant("response_format.type", type,
                           {"json_object", "json_schema", "regex", "text"});
  }
  return std::nullopt;
}

}  // namespace

Conv<ConversationRequest> convert_chat(const JsonObject& body, const ConversionOptions& options) {
  ConversationRequest request;
  Conversation& conversation = request.conversation;
  const JsonArray* messages = nullptr;
  DEEPINFER_CONVERT_TRY(read_array(body, "messages", "", messages));
  if (messages == nullptr) return *missing_field("", "messages");
  DEEPINFER_CONVERT_TRY(read_required_string(body, "model", "", request.model));

  Thinking thinking;
  DEEPINFER_CONVERT_TRY(resolve_thinking(body, options, thinking));
  conversation.thinking_mode = thinking.on;
  conversation.reasoning_effort = thinking.effort;
  DEEPINFER_CONVERT_TRY(read_inference_options(body, request.inference_options));
  DEEPINFER_CONVERT_TRY(read_stop_and_stream(body, request));
  DEEPINFER_CONVERT_TRY(convert_tools(body, thinking.on, conversation));
  DEEPINFER_CONVERT_TRY(transform_messages(*messages, conversation.messages));
  DEEPINFER_CONVERT_TRY(validate_placeholders(conversation));
  DEEPINFER_CONVERT_TRY(convert_response_format(body, conversation));

  ParsingOptions& parsing = request.parsing_options;
  parsing.reasoning_initial_stage =
      thinking.on ? ReasoningInitialStage::Start : ReasoningInitialStage::None;
  parsing.parse_tool_calls =
      !conversation.tools.empty() && conversation.tool_choice != ToolChoice::None;
  parsing.tool_call_initial_stage = conversation.tool_choice == ToolChoice::Required;
  parsing.parse_json_output = conversation.response_format == ResponseFormat::JsonObject;
  return request;
}

}  // namespace deepinfer::recipe::convert
