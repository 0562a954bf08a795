// OpenAI Responses request → ConversationRequest (api spec §4, §4.1).
#include <algorithm>
#include <map>
#include <set>

#include "recipe/convert_common.h"
#include "recipe/python_json.h"

namespace deepinfer::recipe::convert {
namespace {

bool is_web_search(std::string_view type) {
  return type == "web_search" || type == "web_search_2025_08_26";
}

// --- tools ---------------------------------------------------------------------------------

struct DeclaredTool {
  ToolDefinition definition;         // parameters filled in select_tools
  const Json* parameters = nullptr;  // as declared (nullptr: none)
  Json owned_parameters;             // apply_patch's fixed schema
};

// Declared function tools in order; namespace members are flattened to "<ns>::<name>"
// (made unique with "_1", "_2"…), remembered so historical calls resolve to the same name.
struct ToolSet {
  std::vector<DeclaredTool> tools;
  std::map<std::pair<std::string, std::string>, std::string> namespace_names;
  std::set<std::string> top_level_names;
  std::map<std::pair<std::string, std::string>, std::string> historical_names;

  bool is_taken(const std::string& candidate) const {
    if (top_level_names.count(candidate) != 0) return true;
    for (const auto& entry : namespace_names) {
      if (entry.second == candidate) return true;
    }
    return false;
  }

  std::string unique_name(const std::string& base, bool include_historical) const {
    auto taken = [&](const std::string& candidate) {
      if (is_taken(candidate)) return true;
      if (!include_historical) return false;
      for (const auto& entry : historical_names) {
        if (entry.second == candidate) return true;
      }
      return false;
    };
    if (!taken(base)) return base;
    for (size_t i = 1;; ++i) {
      std::string candidate = base + "_" + std::to_string(i);
      if (!taken(candidate)) return candidate;
    }
  }

  // Name of a historical call: namespace members map to their flattened name.
  std::string call_name(const std::string& name, const std::optional<std::string>& ns) {
    if (!ns) return name;
    auto key = std::make_pair(*ns, name);
    if (auto it = namespace_names.find(key); it != namespace_names.end()) return it->second;
    if (auto it = historical_names.find(key); it != historical_names.end()) return it->second;
    std::string flattened = unique_name(*ns + "::" + name, true);
    historical_names[key] = flattened;
    return flattened;
  }
};

Failure read_function_tool(const JsonObject& tool, const std::string& path, DeclaredTool& out) {
  DEEPINFER_CONVERT_TRY(read_required_string(tool, "name", path, out.definition.name));
  DEEPINFER_CONVERT_TRY(validate_tool_name(out.definition.name, path + ".name"));
  DEEPINFER_CONVERT_TRY(read_string(tool, "description", path, out.definition.description));
  DEEPINFER_CONVERT_TRY(read_bool(tool, "strict", path, out.definition.strict));
  out.parameters = find_field(tool, "parameters");
  return std::nullopt;
}

Failure convert_tools(const JsonObject& body, const ConversionOptions& options, ToolSet& set,
                      std::vector<std::string>& custom_names) {
  const JsonArray* tools = nullptr;
  DEEPINFER_CONVERT_TRY(read_array(body, "tools", "", tools));
  if (tools == nullptr) return std::nullopt;
  std::vector<const JsonObject*> objects;
  std::vector<std::string> types;
  for (size_t i = 0; i < tools->size(); ++i) {
    std::string path = index_path("tools", i);
    const JsonObject* tool = nullptr;
    std::string type;
    DEEPINFER_CONVERT_TRY(expect_typed_object((*tools)[i], path, tool, type));
    if (type == "function") {
      std::optional<std::string> name;
      DEEPINFER_CONVERT_TRY(read_string(*tool, "name", path, name));
      if (name) set.top_level_names.insert(*name);
    }
    objects.push_back(tool);
    types.push_back(std::move(type));
  }
  std::set<std::string> namespaces;
  for (size_t i = 0; i < objects.size(); ++i) {
    const JsonObject& tool = *objects[i];
    const std::string& type = types[i];
    std::string path = index_path("tools", i);
    if (type == "function") {
      DeclaredTool declared;
      DEEPINFER_CONVERT_TRY(read_function_tool(tool, path, declared));
      set.tools.push_back(std::move(declared));
    } else if (type == "namespace") {
      std::string ns;
      DEEPINFER_CONVERT_TRY(read_required_string(tool, "name", path, ns));
      std::optional<std::string> ns_description;
      DEEPINFER_CONVERT_TRY(read_string(tool, "description", path, ns_description));
      const JsonArray* members = nullptr;
      DEEPINFER_CONVERT_TRY(read_array(tool, "tools", path, members));
      if (members == nullptr) return missing_field(path, "tools");
      DEEPINFER_CONVERT_TRY(validate_tool_name(ns, path + ".name"));
      if (!namespaces.insert(ns).second) {
        return bad_request(path + ": duplicate namespace name '" + ns + "'");
      }
      std::set<std::string> member_names;
      for (size_t j = 0; j < members->size(); ++j) {
        std::string member_path = index_path(path + ".tools", j);
        const JsonObject* member = nullptr;
        DEEPINFER_CONVERT_TRY(expect_object((*members)[j], member_path, member));
        std::string member_type;
        DEEPINFER_CONVERT_TRY(read_required_string(*member, "type", member_path, member_type));
        if (member_type == "custom") {
          return bad_request(member_path + ": custom tools are not supported inside a namespace");
        }
        if (member_type != "function") {
          return unknown_variant(member_path + ".type", member_type, {"function", "custom"});
        }
        DeclaredTool declared;
        DEEPINFER_CONVERT_TRY(read_function_tool(*member, member_path, declared));
        const std::string member_name = declared.definition.name;
        if (!member_names.insert(member_name).second) {
          return bad_request(member_path + ": tool names within a namespace must be unique");
        }
        if (ns_description && !ns_description->empty()) {
          declared.definition.description =
              *ns_description + "\n" + declared.definition.description.value_or("");
        }
        std::string flattened = set.unique_name(ns + "::" + member_name, false);
        set.namespace_names[{ns, member_name}] = flattened;
        declared.definition.name = std::move(flattened);
        set.tools.push_back(std::move(declared));
      }
    } else if (type == "custom") {
      std::string name;
      DEEPINFER_CONVERT_TRY(read_required_string(tool, "name", path, name));
      if (name != "apply_patch") {
        return bad_request("Unsupported custom tool: '" + name +
                           "'. Only 'apply_patch' is supported");
      }
      if (std::find(custom_names.begin(), custom_names.end(), name) == custom_names.end()) {
        custom_names.push_back(name);
      }
      DeclaredTool declared;
      declared.definition.name = name;
      declared.definition.description = kApplyPatchDescription;
      auto schema = parse_json(kApplyPatchParameters);
      if (!schema.ok()) return internal_error("apply_patch parameters: " + schema.error().message);
      declared.owned_parameters = std::move(schema.value());
      set.tools.push_back(std::move(declared));
    } else if (is_web_search(type)) {
      if (options.responses_web_search == WebSearchPolicy::Reject) {
        return bad_request("Server tools are not supported");
      }
    }
    // Other tool types are ignored (api spec §4).
  }
  return std::nullopt;
}

Failure select_tools(const JsonObject& body, bool thinking, const ConversionOptions& options,
                     ToolSet& set, Conversation& conversation) {
  std::optional<std::string> mode;
  std::optional<std::string> named;
  if (const Json* choice = find_field(body, "tool_choice")) {
    if (const JsonString* text = choice->if_string()) {
      DEEPINFER_CONVERT_TRY(read_tool_choice_mode(*text, mode));
    } else if (const JsonObject* object = choice->if_object()) {
      std::string type;
      DEEPINFER_CONVERT_TRY(read_required_string(*object, "type", "tool_choice", type));
      if (type == "function" || type == "custom") {
        std::string name;
        DEEPINFER_CONVERT_TRY(read_required_string(*object, "name", "tool_choice", name));
        named = std::move(name);
      } else if (is_web_search(type)) {
        // The web_search tool is dropped (Ignore), and a choice naming it with it.
        if (options.responses_web_search == WebSearchPolicy::Reject) {
          return bad_request("Server tools are not supported");
        }
      } else {
        return unknown_variant("tool_choice.type", type,
                               {"function", "custom", "web_search", "web_search_2025_08_26"});
      }
    } else {
      return bad_request("tool_choice: expected a string or an object");
    }
  }
  if (mode == "none") {
    conversation.tool_choice = ToolChoice::None;
    return std::nullopt;
  }
  conversation.tool_choice = ToolChoice::Auto;
  if (set.tools.empty()) return std::nullopt;
  std::set<std::string> names;
  for (DeclaredTool& declared : set.tools) {
    ToolDefinition& definition = declared.definition;
    if (!names.insert(definition.name).second) return bad_request("Tool names must be unique");
    definition.parameters = JsonObject{};
    if (!declared.owned_parameters.is_null()) {
      definition.parameters = std::move(declared.owned_parameters);
    } else if (declared.parameters != nullptr) {
      DEEPINFER_CONVERT_TRY(validate_tool_parameters(*declared.parameters,
                                                     "Tool '" + definition.name + "' parameters"));
      definition.parameters = *declared.parameters;
    }
    conversation.tools.push_back(std::move(definition));
  }
  return resolve_tool_choice(mode, named, names, thinking, conversation);
}

// --- content -------------------------------------------------------------------------------

using Content = ContentParts;

Failure input_image(const JsonObject& block, const std::string& path, Content& out) {
  std::optional<std::string> url;
  std::optional<std::string> file_id;
  DEEPINFER_CONVERT_TRY(read_string(block, "image_url", path, url));
  DEEPINFER_CONVERT_TRY(read_string(block, "file_id", path, file_id));
  ImageDetail detail = ImageDetail::High;
  DEEPINFER_CONVERT_TRY(read_image_detail(block, path, detail));
  bool has_url = url && !url->empty();  // an empty image_url counts as absent
  if (!has_url && !file_id) {
    return bad_request(path + ": input_image must have image_url or file_id");
  }
  if (has_url && file_id) {
    return bad_request(path + ": input_image cannot have both image_url and file_id");
  }
  if (!has_url) return file_id_unsupported(path);
  Conv<ImageSource> source = image_url_source(*url, detail, path + ".image_url");
  if (!source.ok()) return source.error();
  out.images.push_back(std::move(source.value()));
  return std::nullopt;
}

// Message content (`output_text` allowed) or tool output items (`output_items`): blocks
// joined with "\n\n". `block_prefix` is the path the block index is appended to.
Conv<Content> responses_content(const Json& value, const std::string& value_path,
                                const std::string& block_prefix, bool output_items) {
  return read_content(
      value, value_path, "expected a string or an array", block_prefix,
      [output_items](const JsonObject& block, const std::string& type, const std::string& path,
                     Content& piece) -> Failure {
        if (type == "input_text" || (type == "output_text" && !output_items)) {
          DEEPINFER_CONVERT_TRY(read_required_string(block, "text", path, piece.text));
        } else if (type == "input_image") {
          DEEPINFER_CONVERT_TRY(input_image(block, path, piece));
          piece.text = kImagePlaceholder;
        } else if (type == "input_file") {
          piece.text = kUnsupportedDocument;
        } else {
          return bad_request("Unsupported content block");
        }
        return std::nullopt;
      });
}

// --- input items ---------------------------------------------------------------------------

struct ToolResult {
  std::string content;
  std::vector<ImageSource> images;
};

// Function calls pending their outputs; flushed sorted by call_id (byte order).
struct CallGroup {
  std::vector<ToolCall> calls;
  std::map<std::string, ToolResult> outputs;
};

class InputConverter {
 public:
  InputConverter(ToolSet& tools, std::vector<Message>& messages)
      : tools_(tools), messages_(messages) {}

  Failure run(const JsonArray& items) {
    if (items.empty()) return bad_request("Input items array must not be empty");
    for (size_t i = 0; i < items.size(); ++i) {
      DEEPINFER_CONVERT_TRY(item(items[i], i));
    }
    flush_group();
    return check_pending();
  }

 private:
  Failure item(const Json& value, size_t index) {
    std::string path = index_path("input", index);
    const JsonObject* item = nullptr;
    DEEPINFER_CONVERT_TRY(expect_object(value, path, item));
    std::optional<std::string> type;
    DEEPINFER_CONVERT_TRY(read_string(*item, "type", path, type));
    if (!type || *type == "message") {
      DEEPINFER_CONVERT_TRY(check_pending());
      flush_group();
      return message(*item, path);
    }
    if (*type == "reasoning") {
      DEEPINFER_CONVERT_TRY(check_pending());
      flush_group();
      return reasoning(*item, path);
    }
    if (*type == "function_call" || *type == "custom_tool_call") {
      bool custom = *type == "custom_tool_call";
      ToolCall call;
      DEEPINFER_CONVERT_TRY(read_required_string(*item, "call_id", path, call.id));
      std::string name;
      DEEPINFER_CONVERT_TRY(read_required_string(*item, "name", path, name));
      if (custom) {
        std::string input;
        DEEPINFER_CONVERT_TRY(read_required_string(*item, "input", path, input));
        JsonObject arguments;
        arguments["input"] = input;
        call.arguments = to_compact_json(arguments);
        call.name = std::move(name);
      } else {
        DEEPINFER_CONVERT_TRY(read_required_string(*item, "arguments", path, call.arguments));
        std::optional<std::string> ns;
        DEEPINFER_CONVERT_TRY(read_string(*item, "namespace", path, ns));
        call.name = tools_.call_name(name, ns);
      }
      DEEPINFER_CONVERT_TRY(check_call_id(index, call.id));
      pending_.push_back(call.id);
      group_.calls.push_back(std::move(call));
      return std::nullopt;
    }
    if (*type == "function_call_output" || *type == "custom_tool_call_output") {
      std::string call_id;
      DEEPINFER_CONVERT_TRY(read_required_string(*item, "call_id", path, call_id));
      const Json* output = find_field(*item, "output");
      if (output == nullptr && *type == "function_call_output") {
        return missing_field(path, "output");
      }
      DEEPINFER_CONVERT_TRY(resolve_output(index, call_id));
      ToolResult result;
      if (output != nullptr) {
        Conv<Content> content =
            responses_content(*output, path + ".output", path + ".output", true);
        if (!content.ok()) return content.error();
        result = ToolResult{std::move(content.value().text), std::move(content.value().images)};
      }
      group_.outputs[call_id] = std::move(result);
      if (group_.outputs.size() >= group_.calls.size()) flush_group();
      return std::nullopt;
    }
    return std::nullopt;  // other item types (e.g. web_search_call) are ignored
  }

  Failure message(const JsonObject& item, const std::string& path) {
    std::string role;
    DEEPINFER_CONVERT_TRY(read_required_string(item, "role", path, role));
    if (role != "user" && role != "assistant" && role != "system" && role != "developer") {
      return unknown_variant(path + ".role", role, {"user", "assistant", "system", "developer"});
    }
    const Json* content_value = find_field(item, "content");
    if (content_value == nullptr) return missing_field(path, "content");
    Conv<Content> content =
        responses_content(*content_value, path + ".content", path + ".content", false);
    if (!content.ok()) return content.error();
    Content& converted = content.value();
    if (role == "user" || role == "developer") {
      messages_.push_back(
          make_message(Role::User, std::move(converted.text), std::move(converted.images)));
      return std::nullopt;
    }
    if (!converted.images.empty()) return image_not_allowed(role);
    if (role == "system") {
      messages_.push_back(make_message(Role::System, std::move(converted.text)));
      return std::nullopt;
    }
    // Consecutive assistant messages merge while the previous one has no tool calls.
    if (!messages_.empty() && messages_.back().role == Role::Assistant &&
        messages_.back().tool_calls.empty()) {
      Message& last = messages_.back();
      if (!converted.text.empty()) {
        if (!last.content.empty()) last.content += "\n\n";
        last.content += converted.text;
      }
      return std::nullopt;
    }
    messages_.push_back(make_message(Role::Assistant, std::move(converted.text)));
    return std::nullopt;
  }

  Failure reasoning(const JsonObject& item, const std::string& path) {
    const JsonArray* blocks = nullptr;
    DEEPINFER_CONVERT_TRY(read_array(item, "content", path, blocks));
    std::vector<std::string> texts;
    if (blocks != nullptr) {
      for (size_t j = 0; j < blocks->size(); ++j) {
        std::string block_path = index_path(path + ".content", j);
        const JsonObject* block = nullptr;
        DEEPINFER_CONVERT_TRY(expect_object((*blocks)[j], block_path, block));
        std::string text;
        DEEPINFER_CONVERT_TRY(read_required_string(*block, "text", block_path, text));
        texts.push_back(std::move(text));
      }
    }
    std::string text = join(texts, "\n");
    if (text.empty()) return std::nullopt;
    if (messages_.empty() || messages_.back().role != Role::Assistant ||
        !messages_.back().content.empty()) {
      messages_.push_back(make_message(Role::Assistant, ""));
    }
    Message& last = messages_.back();
    if (!last.reasoning_content.empty()) last.reasoning_content += "\n";
    last.reasoning_content += text;
    return std::nullopt;
  }

  static ConversionError empty_call_id(size_t index) {
    return bad_request("Invalid 'input[" + std::to_string(index) +
                       "].call_id': empty string. Expected a string with minimum length 1, but "
                       "got an empty string instead.");
  }

  bool is_pending(const std::string& id) const {
    return std::find(pending_.begin(), pending_.end(), id) != pending_.end();
  }

  Failure check_call_id(size_t index, const std::string& id) {
    if (id.empty()) return empty_call_id(index);
    if (is_pending(id) || resolved_.count(id) != 0) {
      return bad_request("Duplicate 'call_id': " + id + ".");
    }
    return std::nullopt;
  }

  Failure resolve_output(size_t index, const std::string& id) {
    if (id.empty()) return empty_call_id(index);
    if (!is_pending(id)) {
      if (resolved_.count(id) != 0) {
        return bad_request("Duplicate tool output for call_id: " + id + ".");
      }
      return bad_request("No tool call found for tool output with call_id " + id + ".");
    }
    pending_.erase(std::find(pending_.begin(), pending_.end(), id));
    resolved_.insert(id);
    return std::nullopt;
  }

  Failure check_pending() const {
    if (pending_.empty()) return std::nullopt;
    return bad_request("No tool output found for tool call " + pending_.front() + ".");
  }

  void flush_group() {
    if (group_.calls.empty()) {
      group_ = CallGroup{};
      return;
    }
    std::vector<ToolCall> calls = std::move(group_.calls);
    std::stable_sort(calls.begin(), calls.end(),
                     [](const ToolCall& a, const ToolCall& b) { return a.id < b.id; });
    std::vector<Message> results;
    for (const ToolCall& call : calls) {
      auto it = group_.outputs.find(call.id);
      if (it == group_.outputs.end()) continue;
      results.push_back(make_message(Role::Tool, std::move(it->second.content),
                                     std::move(it->second.images), call.id));
    }
    if (messages_.empty() || messages_.back().role != Role::Assistant) {
      messages_.push_back(make_message(Role::Assistant, ""));
    }
    std::vector<ToolCall>& target = messages_.back().tool_calls;
    for (ToolCall& call : calls) target.push_back(std::move(call));
    for (Message& result : results) messages_.push_back(std::move(result));
    group_ = CallGroup{};
  }

  ToolSet& tools_;
  std::vector<Message>& messages_;
  std::vector<std::string> pending_;  // insertion order: the first one is reported
  std::set<std::string> resolved_;
  CallGroup group_;
};

Failure resolve_thinking(const JsonObject& body, const ConversionOptions& options,
                         Conversation& conversation) {
  // Only reasoning.effort switches thinking here; a `thinking` field is ignored (api spec §4).
  const JsonObject* reasoning = nullptr;
  DEEPINFER_CONVERT_TRY(read_object(body, "reasoning", "", reasoning));
  std::optional<std::string> effort_name;
  if (reasoning != nullptr) {
    DEEPINFER_CONVERT_TRY(read_string(*reasoning, "effort", "reasoning", effort_name));
  }
  conversation.thinking_mode = options.default_thinking_mode;
  conversation.reasoning_effort.reset();
  if (effort_name) {
    std::optional<OpenAiEffort> effort = openai_effort(*effort_name);
    if (!effort) {
      return unknown_variant("reasoning.effort", *effort_name,
                             {"none", "minimal", "low", "medium", "high", "xhigh", "max"});
    }
    conversation.thinking_mode = effort->thinking;
    conversation.reasoning_effort = effort->effort;
    return std::nullopt;
  }
  if (conversation.thinking_mode) conversation.reasoning_effort = ReasoningEffort::High;
  return std::nullopt;
}

Failure convert_text_format(const JsonObject& body, Conversation& conversation) {
  conversation.response_format = ResponseFormat::Text;
  const JsonObject* text = nullptr;
  DEEPINFER_CONVERT_TRY(read_object(body, "text", "", text));
  if (text == nullptr) return std::nullopt;
  const JsonObject* format = nullptr;
  DEEPINFER_CONVERT_TRY(read_object(*text, "format", "text", format));
  if (format == nullptr) return std::nullopt;
  std::string type;
  DEEPINFER_CONVERT_TRY(read_required_string(*format, "type", "text.format", type));
  if (type == "text" || type == "json_schema") return std::nullopt;
  if (type != "json_object") {
    return unknown_variant("text.format.type", type, {"text", "json_object", "json_schema"});
  }
  if (!contains_json_word(conversation.messages)) {
    return bad_request(
        "Response input messages must contain the word 'json' to use text.format of type "
        "json_object");
  }
  conversation.response_format = ResponseFormat::JsonObject;
  return std::nullopt;
}

}  // namespace

Conv<ConversationRequest> convert_responses(const JsonObject& body,
                                            const ConversionOptions& options) {
  ConversationRequest request;
  Conversation& conversation = request.conversation;
  DEEPINFER_CONVERT_TRY(read_required_string(body, "model", "", request.model));
  const Json* input = find_field(body, "input");
  if (input != nullptr && !input->is_string() && !input->is_array()) {
    return bad_request("input: expected a string or an array of input items");
  }
  std::optional<std::string> instructions;
  DEEPINFER_CONVERT_TRY(read_string(body, "instructions", "", instructions));

  DEEPINFER_CONVERT_TRY(resolve_thinking(body, options, conversation));
  DEEPINFER_CONVERT_TRY(read_sampling(body, "max_output_tokens", request.inference_options));
  ToolSet tools;
  DEEPINFER_CONVERT_TRY(convert_tools(body, options, tools, request.custom_tool_names));

  if (instructions && !instructions->empty()) {
    conversation.messages.push_back(make_message(Role::System, std::move(*instructions)));
  }
  if (input == nullptr) {
    if (conversation.messages.empty()) {
      return bad_request("Either input or instructions must be provided");
    }
  } else if (const JsonString* text = input->if_string()) {
    conversation.messages.push_back(make_message(Role::User, std::string(*text)));
  } else {
    InputConverter converter(tools, conversation.messages);
    DEEPINFER_CONVERT_TRY(converter.run(input->get_array()));
  }
  DEEPINFER_CONVERT_TRY(
      select_tools(body, conversation.thinking_mode, options, tools, conversation));
  DEEPINFER_CONVERT_TRY(validate_placeholders(conversation));
  DEEPINFER_CONVERT_TRY(convert_text_format(body, conversation));

  std::optional<bool> stream;
  DEEPINFER_CONVERT_TRY(read_bool(body, "stream", "", stream));
  request.stream = stream.value_or(false);
  request.include_usage = true;

  ParsingOptions& parsing = request.parsing_options;
  parsing.reasoning_initial_stage =
      conversation.thinking_mode ? ReasoningInitialStage::Start : ReasoningInitialStage::None;
  parsing.parse_tool_calls = !conversation.tools.empty();
  parsing.tool_call_initial_stage = conversation.tool_choice == ToolChoice::Required;
  parsing.parse_json_output = conversation.response_format == ResponseFormat::JsonObject;
  return request;
}

}  // namespace deepinfer::recipe::convert
