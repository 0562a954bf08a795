// Anthropic Messages request → ConversationRequest (api spec §5, §5.1).
#include <map>
#include <set>

#include "recipe/convert_common.h"
#include "recipe/python_json.h"

namespace deepinfer::recipe::convert {
namespace {

using Content = ContentParts;

Conv<ImageSource> image_source(const JsonObject& block, const std::string& path) {
  const JsonObject* source = nullptr;
  DEEPINFER_CONVERT_TRY(read_object(block, "source", path, source));
  if (source == nullptr) return *missing_field(path, "source");
  std::string source_path = path + ".source";
  std::string type;
  DEEPINFER_CONVERT_TRY(read_required_string(*source, "type", source_path, type));
  if (type == "base64") {
    std::string media_type;
    std::string data;
    DEEPINFER_CONVERT_TRY(read_required_string(*source, "media_type", source_path, media_type));
    DEEPINFER_CONVERT_TRY(read_required_string(*source, "data", source_path, data));
    return base64_image_source(media_type, data, path);
  }
  if (type == "url") {
    std::string url;
    DEEPINFER_CONVERT_TRY(read_required_string(*source, "url", source_path, url));
    return external_image_source(url, ImageDetail::High, path);
  }
  if (type == "file") return file_id_unsupported(path);
  return unknown_variant(source_path + ".type", type, {"base64", "url", "file"});
}

// One block of the text-like kinds (text, tool_reference, image, document). Returns false in
// `known` for other block types.
Failure text_like_block(const JsonObject& block, const std::string& type, const std::string& path,
                        Content& out, bool& known) {
  known = true;
  if (type == "text") {
    std::string text;
    DEEPINFER_CONVERT_TRY(read_required_string(block, "text", path, text));
    out.text = std::move(text);
  } else if (type == "tool_reference") {
    std::string name;
    DEEPINFER_CONVERT_TRY(read_required_string(block, "tool_name", path, name));
    out.text = std::move(name);
  } else if (type == "image") {
    Conv<ImageSource> source = image_source(block, path);
    if (!source.ok()) return source.error();
    out.text = std::string(kImagePlaceholder);
    out.images.push_back(std::move(source.value()));
  } else if (type == "document") {
    out.text = std::string(kUnsupportedDocument);
  } else {
    known = false;
  }
  return std::nullopt;
}

// String or text blocks (system prompt, tool_result content, compatibility system role):
// blocks joined with "\n\n"; block paths are "<prefix>[j]".
Conv<Content> text_or_blocks(const Json& value, const std::string& value_path,
                             const std::string& prefix) {
  return read_content(value, value_path, "expected a string or an array", prefix,
                      [](const JsonObject& block, const std::string& type, const std::string& path,
                         Content& piece) -> Failure {
                        bool known = false;
                        DEEPINFER_CONVERT_TRY(text_like_block(block, type, path, piece, known));
                        if (!known) return bad_request("Unsupported content block");
                        return std::nullopt;
                      });
}

std::string sorted_ids(const std::set<std::string>& ids) {
  return join(std::vector<std::string>(ids.begin(), ids.end()), ", ");
}

constexpr const char* kToolUseTail =
    "`tool_use` ids were found without `tool_result` blocks immediately after: ";
constexpr const char* kToolUseEnd =
    ". Each `tool_use` block must have a corresponding `tool_result` block in the next message.";

// The reference prints "messages.N: `tool_use`…" when a later block finds calls unanswered,
// and "messages.N:`tool_use`…" (no space) when a user message or the request ends with calls
// unanswered; both are kept as they are.
ConversionError unanswered(const std::string& where, bool space, const std::set<std::string>& ids) {
  return bad_request(where + (space ? ": " : ":") + kToolUseTail + sorted_ids(ids) + kToolUseEnd);
}

class MessageConverter {
 public:
  MessageConverter(const ConversionOptions& options, std::vector<Message>& out)
      : options_(options), out_(out) {}

  Failure run(const JsonArray& messages) {
    for (size_t index = 0; index < messages.size(); ++index) {
      std::string path = "messages." + std::to_string(index);
      const JsonObject* message = nullptr;
      DEEPINFER_CONVERT_TRY(expect_object(messages[index], path, message));
      std::string role;
      DEEPINFER_CONVERT_TRY(read_required_string(*message, "role", path, role));
      if (role != "user" && role != "assistant" && role != "system") {
        return unknown_variant(path, role, {"user", "assistant", "system"});
      }
      const Json* content = message->if_contains("content");
      if (content == nullptr) return missing_field(path, "content");
      if (role == "system") {
        DEEPINFER_CONVERT_TRY(resolved(index));
        Conv<Content> converted = text_or_blocks(*content, path + ".content", path);
        if (!converted.ok()) return converted.error();
        out_.push_back(make_message(
            Role::User, "<system-reminder>\n" + converted.value().text + "\n</system-reminder>",
            std::move(converted.value().images)));
        continue;
      }
      if (const JsonString* text = content->if_string()) {
        DEEPINFER_CONVERT_TRY(resolved(index));
        out_.push_back(
            make_message(role == "user" ? Role::User : Role::Assistant, std::string(*text)));
        continue;
      }
      const JsonArray* blocks = content->if_array();
      if (blocks == nullptr) {
        return bad_request(path + ".content: expected a string or an array of content blocks");
      }
      if (blocks->empty()) {
        return bad_request(path + ": all messages must have non-empty content");
      }
      if (role == "user") {
        DEEPINFER_CONVERT_TRY(user(*blocks, index));
      } else {
        DEEPINFER_CONVERT_TRY(resolved(index));
        DEEPINFER_CONVERT_TRY(assistant(*blocks, index));
      }
    }
    if (!tool_use_ids_.empty()) {
      return unanswered("messages." + std::to_string(messages.size() - 1), false, tool_use_ids_);
    }
    return std::nullopt;
  }

 private:
  Failure resolved(size_t index) const {
    if (tool_use_ids_.empty()) return std::nullopt;
    return unanswered("messages." + std::to_string(index), true, tool_use_ids_);
  }

  Failure user(const JsonArray& blocks, size_t index) {
    std::string prefix = "messages." + std::to_string(index);
    std::set<std::string> matched;
    for (size_t j = 0; j < blocks.size(); ++j) {
      std::string path = index_path(prefix + ".content", j);
      const JsonObject* block = nullptr;
      std::string type;
      DEEPINFER_CONVERT_TRY(expect_typed_object(blocks[j], path, block, type));
      if (type == "text" || type == "tool_reference" || type == "image" || type == "document") {
        DEEPINFER_CONVERT_TRY(resolved(index));
        Content piece;
        bool known = false;
        DEEPINFER_CONVERT_TRY(text_like_block(*block, type, path, piece, known));
        out_.push_back(make_message(Role::User, std::move(piece.text), std::move(piece.images)));
      } else if (type == "tool_result") {
        std::string id;
        DEEPINFER_CONVERT_TRY(read_required_string(*block, "tool_use_id", path, id));
        std::string where = prefix + ".content." + std::to_string(j);
        if (matched.count(id) != 0) {
          return bad_request(where +
                             ": each tool_use must have a single result. Found multiple "
                             "`tool_result` blocks with id: " +
                             id);
        }
        if (tool_use_ids_.count(id) == 0) {
          return bad_request("unexpected `" + where +
                             ": tool_use_id` found in `tool_result` blocks: " + id +
                             ". Each `tool_result` block must have a corresponding `tool_use` "
                             "block in the previous message.");
        }
        tool_use_ids_.erase(id);
        matched.insert(id);
        Content result;
        if (const Json* content = find_field(*block, "content")) {
          Conv<Content> converted = text_or_blocks(*content, path + ".content", path);
          if (!converted.ok()) return converted.error();
          result = std::move(converted.value());
        }
        std::optional<bool> is_error;  // accepted; the result text is kept either way
        DEEPINFER_CONVERT_TRY(read_bool(*block, "is_error", path, is_error));
        out_.push_back(
            make_message(Role::Tool, std::move(result.text), std::move(result.images), id));
      } else if (type == "tool_use" || type == "server_tool_use" ||
                 type == "web_search_tool_result") {
        return bad_request(prefix + ": `" + type + "` blocks can only be in `assistant` messages");
      } else if (type == "thinking") {
        return bad_request(prefix +
                           ".content: thinking blocks may only be in `assistant` messages");
      } else {
        return bad_request("Unsupported content block");
      }
    }
    if (!tool_use_ids_.empty()) {
      return unanswered("messages." + std::to_string(index - 1), false, tool_use_ids_);
    }
    return std::nullopt;
  }

  Failure assistant(const JsonArray& blocks, size_t index) {
    std::string prefix = "messages." + std::to_string(index);
    Message message = make_message(Role::Assistant, "");
    bool has_reasoning = false;
    for (size_t j = 0; j < blocks.size(); ++j) {
      std::string path = index_path(prefix + ".content", j);
      const JsonObject* block = nullptr;
      std::string type;
      DEEPINFER_CONVERT_TRY(expect_typed_object(blocks[j], path, block, type));
      if (type == "text" || type == "tool_reference" || type == "image" || type == "document") {
        if (!message.tool_calls.empty()) {
          return unanswered(prefix + "." + std::to_string(j), true, tool_use_ids_);
        }
        Content piece;
        bool known = false;
        DEEPINFER_CONVERT_TRY(text_like_block(*block, type, path, piece, known));
        if (!piece.images.empty()) return image_not_allowed("assistant");
        if (!message.content.empty()) message.content += "\n\n";
        message.content += piece.text;
      } else if (type == "tool_use") {
        ToolCall call;
        DEEPINFER_CONVERT_TRY(read_required_string(*block, "id", path, call.id));
        DEEPINFER_CONVERT_TRY(read_required_string(*block, "name", path, call.name));
        const Json* input = block->if_contains("input");
        if (input == nullptr) return missing_field(path, "input");
        call.arguments = to_python_json(*input);  // api spec §5.1: Python-style JSON
        if (!tool_use_ids_.insert(call.id).second) {
          return bad_request(prefix + ".content." + std::to_string(j) +
                             ": `tool_use` ids must be unique");
        }
        message.tool_calls.push_back(std::move(call));
      } else if (type == "tool_result") {
        return bad_request(prefix + ": `tool_result` blocks can only be in `user` messages");
      } else if (type == "thinking") {
        std::string thinking;
        DEEPINFER_CONVERT_TRY(read_required_string(*block, "thinking", path, thinking));
        if (has_reasoning) message.reasoning_content += "\n\n";
        message.reasoning_content += thinking;
        has_reasoning = true;
      } else if (type == "server_tool_use" || type == "web_search_tool_result") {
        if (options_.messages_web_search == WebSearchPolicy::Reject) {
          return bad_request("Unsupported content block: server tools are not supported");
        }
      } else {
        return bad_request("Unsupported content block");
      }
    }
    out_.push_back(std::move(message));
    return std::nullopt;
  }

  const ConversionOptions& options_;
  std::vector<Message>& out_;
  std::set<std::string> tool_use_ids_;  // calls of the last assistant not yet answered
};

Failure resolve_thinking(const JsonObject& body, const ConversionOptions& options,
                         ConversationRequest& request) {
  std::optional<ReasoningEffort> effort;
  const JsonObject* output_config = nullptr;
  DEEPINFER_CONVERT_TRY(read_object(body, "output_config", "", output_config));
  if (output_config != nullptr) {
    std::optional<std::string> name;
    DEEPINFER_CONVERT_TRY(read_string(*output_config, "effort", "output_config", name));
    if (name) {
      if (*name == "low") {
        effort = ReasoningEffort::Low;
      } else if (*name == "medium" || *name == "high") {
        effort = ReasoningEffort::High;
      } else if (*name == "xhigh") {
        effort = ReasoningEffort::Xhigh;
      } else if (*name == "max" || *name == "ultra") {
        effort = ReasoningEffort::Max;
      } else {
        return unknown_variant("output_config.effort", *name,
                               {"low", "medium", "high", "xhigh", "ultra", "max"});
      }
    }
  }
  const JsonObject* thinking = nullptr;
  DEEPINFER_CONVERT_TRY(read_object(body, "thinking", "", thinking));
  bool on = options.default_thinking_mode;
  if (thinking != nullptr) {
    std::string type;
    DEEPINFER_CONVERT_TRY(read_required_string(*thinking, "type", "thinking", type));
    if (type == "enabled" || type == "adaptive") {
      on = true;
    } else if (type == "disabled") {
      on = false;
    } else {
      return unknown_variant("thinking.type", type, {"enabled", "adaptive", "disabled"});
    }
    std::optional<int64_t> budget;
    DEEPINFER_CONVERT_TRY(read_integer(*thinking, "budget_tokens", "thinking", budget));
    if (budget && *budget < 0)
      return bad_request("thinking.budget_tokens: expected an integer >= 0");
    request.inference_options.thinking_budget_tokens = budget;
  } else if (effort) {
    on = true;  // an effort without `thinking` switches thinking on
  }
  request.conversation.thinking_mode = on;
  request.conversation.reasoning_effort.reset();
  if (on) request.conversation.reasoning_effort = effort.value_or(ReasoningEffort::High);
  return std::nullopt;
}

Failure read_stop_sequences(const JsonObject& body, ParsingOptions& parsing) {
  const JsonArray* stop = nullptr;
  DEEPINFER_CONVERT_TRY(read_array(body, "stop_sequences", "", stop));
  if (stop == nullptr) return std::nullopt;
  static const char* kDetail = "stop_sequences must contain at most 16 non-empty strings";
  if (stop->size() > kMaxStopSequences) return bad_request(kDetail);
  for (size_t i = 0; i < stop->size(); ++i) {
    const JsonString* text = (*stop)[i].if_string();
    if (text == nullptr)
      return bad_request(index_path("stop_sequences", i) + ": expected a string");
    if (text->empty()) return bad_request(kDetail);
    parsing.stop_sequences.emplace_back(text->data(), text->size());
  }
  return std::nullopt;
}

Failure convert_tools(const JsonObject& body, const ConversionOptions& options,
                      ConversationRequest& request) {
  Conversation& conversation = request.conversation;
  const JsonArray* tools = nullptr;
  DEEPINFER_CONVERT_TRY(read_array(body, "tools", "", tools));
  std::set<std::string> names;
  std::set<std::string> ignored_server_tools;
  std::vector<ToolDefinition> definitions;
  for (size_t i = 0; tools != nullptr && i < tools->size(); ++i) {
    std::string path = "tools." + std::to_string(i);
    const JsonObject* tool = nullptr;
    DEEPINFER_CONVERT_TRY(expect_object((*tools)[i], path, tool));
    ToolDefinition definition;
    DEEPINFER_CONVERT_TRY(read_required_string(*tool, "name", path, definition.name));
    std::optional<std::string> type;
    DEEPINFER_CONVERT_TRY(read_string(*tool, "type", path, type));
    if (type) {
      if (type->rfind("web_search", 0) == 0 &&
          options.messages_web_search == WebSearchPolicy::Ignore) {
        ignored_server_tools.insert(definition.name);
        continue;
      }
      return bad_request(path + ": server tools are not supported");
    }
    DEEPINFER_CONVERT_TRY(validate_tool_name(definition.name, path + ".name"));
    if (!names.insert(definition.name).second) return bad_request("Tool names must be unique");
    const Json* schema = find_field(*tool, "input_schema");
    if (schema == nullptr) return bad_request(path + ": missing input_schema");
    DEEPINFER_CONVERT_TRY(validate_tool_parameters(*schema, path + ".input_schema"));
    definition.parameters = *schema;
    DEEPINFER_CONVERT_TRY(read_string(*tool, "description", path, definition.description));
    definitions.push_back(std::move(definition));
  }

  conversation.tool_choice = ToolChoice::Auto;
  const JsonObject* choice = nullptr;
  DEEPINFER_CONVERT_TRY(read_object(body, "tool_choice", "", choice));
  std::string type = "auto";
  if (choice != nullptr) {
    DEEPINFER_CONVERT_TRY(read_required_string(*choice, "type", "tool_choice", type));
    if (type != "auto" && type != "any" && type != "tool" && type != "none") {
      return unknown_variant("tool_choice.type", type, {"auto", "any", "tool", "none"});
    }
    if (type != "none") {
      DEEPINFER_CONVERT_TRY(read_bool(*choice, "disable_parallel_tool_use", "tool_choice",
                                      request.inference_options.disable_parallel_tool_use));
    }
  }
  if (type == "none") {
    conversation.tool_choice = ToolChoice::None;
    return std::nullopt;
  }
  if (type == "tool") {
    std::string name;
    DEEPINFER_CONVERT_TRY(read_required_string(*choice, "name", "tool_choice", name));
    if (ignored_server_tools.count(name) == 0) {  // a dropped server tool drops its choice
      if (names.count(name) == 0) {
        return bad_request("tool_choice: no tool named '" + name + "' was specified");
      }
      if (conversation.thinking_mode) {
        return bad_request("Thinking mode does not support this tool_choice");
      }
      keep_only_tool(definitions, name);
      conversation.tool_choice = ToolChoice::Required;
    }
  }
  // "any" permits text replies too, so it maps to Auto (api spec §5).
  conversation.tools = std::move(definitions);
  return std::nullopt;
}

}  // namespace

Conv<ConversationRequest> convert_messages(const JsonObject& body,
                                           const ConversionOptions& options) {
  ConversationRequest request;
  Conversation& conversation = request.conversation;
  DEEPINFER_CONVERT_TRY(read_required_string(body, "model", "", request.model));
  const JsonArray* messages = nullptr;
  DEEPINFER_CONVERT_TRY(read_array(body, "messages", "", messages));
  if (messages == nullptr) return *missing_field("", "messages");

  DEEPINFER_CONVERT_TRY(resolve_thinking(body, options, request));
  DEEPINFER_CONVERT_TRY(read_sampling(body, "max_tokens", request.inference_options));
  DEEPINFER_CONVERT_TRY(read_stop_sequences(body, request.parsing_options));
  DEEPINFER_CONVERT_TRY(convert_tools(body, options, request));

  if (messages->empty()) return bad_request("messages: at least one message is required");
  if (const Json* system = find_field(body, "system")) {
    Conv<Content> converted = text_or_blocks(*system, "system", "system");
    if (!converted.ok()) return converted.error();
    if (!converted.value().images.empty()) return image_not_allowed("system");
    conversation.messages.push_back(make_message(Role::System, converted.value().text));
  }
  MessageConverter converter(options, conversation.messages);
  DEEPINFER_CONVERT_TRY(converter.run(*messages));
  DEEPINFER_CONVERT_TRY(validate_placeholders(conversation));
  conversation.response_format = ResponseFormat::Text;  // JSON mode never (api spec §5)

  std::optional<bool> stream;
  DEEPINFER_CONVERT_TRY(read_bool(body, "stream", "", stream));
  request.stream = stream.value_or(false);
  request.include_usage = true;

  ParsingOptions& parsing = request.parsing_options;
  parsing.reasoning_initial_stage =
      conversation.thinking_mode ? ReasoningInitialStage::Start : ReasoningInitialStage::None;
  parsing.parse_tool_calls = !conversation.tools.empty();
  parsing.tool_call_initial_stage = conversation.tool_choice == ToolChoice::Required;
  parsing.parse_json_output = false;
  return request;
}

}  // namespace deepinfer::recipe::convert
