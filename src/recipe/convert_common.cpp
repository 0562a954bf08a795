#include "recipe/convert_common.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "recipe/python_json.h"

namespace deepinfer::recipe::convert {

ConversionError bad_request(std::string detail) {
  return ConversionError{ConversionError::Kind::BadRequest, std::move(detail)};
}

ConversionError internal_error(std::string detail) {
  return ConversionError{ConversionError::Kind::Internal, std::move(detail)};
}

std::string field_path(std::string_view path, std::string_view key) {
  std::string out(path);
  if (!out.empty()) out += '.';
  out += key;
  return out;
}

std::string index_path(std::string_view path, size_t index) {
  std::string out(path);
  out += '[';
  out += std::to_string(index);
  out += ']';
  return out;
}

// --- typed readers -----------------------------------------------------------------------

namespace {

ConversionError expected(std::string_view path, std::string_view key, std::string_view kind) {
  return bad_request(field_path(path, key) + ": expected " + std::string(kind));
}

}  // namespace

const Json* find_field(const JsonObject& object, std::string_view key) {
  const Json* value = object.if_contains(key);
  if (value == nullptr || value->is_null()) return nullptr;
  return value;
}

Failure missing_field(std::string_view path, std::string_view key) {
  std::string detail;
  if (!path.empty()) detail = std::string(path) + ": ";
  detail += "missing field `" + std::string(key) + "`";
  return bad_request(std::move(detail));
}

ConversionError unknown_variant(std::string_view path, std::string_view value,
                                std::initializer_list<std::string_view> expected_values) {
  std::string detail;
  if (!path.empty()) detail = std::string(path) + ": ";
  detail += "unknown variant `" + std::string(value) + "`, expected one of ";
  bool first = true;
  for (std::string_view name : expected_values) {
    if (!first) detail += ", ";
    first = false;
    detail += "`" + std::string(name) + "`";
  }
  return bad_request(std::move(detail));
}

Failure expect_object(const Json& value, std::string_view path, const JsonObject*& out) {
  out = value.if_object();
  if (out == nullptr) return bad_request(std::string(path) + ": expected an object");
  return std::nullopt;
}

Failure expect_typed_object(const Json& value, std::string_view path, const JsonObject*& out,
                            std::string& type) {
  DEEPINFER_CONVERT_TRY(expect_object(value, path, out));
  return read_required_string(*out, "type", path, type);
}

Failure read_object(const JsonObject& object, std::string_view key, std::string_view path,
                    const JsonObject*& out) {
  out = nullptr;
  const Json* value = find_field(object, key);
  if (value == nullptr) return std::nullopt;
  out = value->if_object();
  if (out == nullptr) return expected(path, key, "an object");
  return std::nullopt;
}

Failure read_array(const JsonObject& object, std::string_view key, std::string_view path,
                   const JsonArray*& out) {
  out = nullptr;
  const Json* value = find_field(object, key);
  if (value == nullptr) return std::nullopt;
  out = value->if_array();
  if (out == nullptr) return expected(path, key, "an array");
  return std::nullopt;
}

Failure read_string(const JsonObject& object, std::string_view key, std::string_view path,
                    std::optional<std::string>& out) {
  out.reset();
  const Json* value = find_field(object, key);
  if (value == nullptr) return std::nullopt;
  const JsonString* text = value->if_string();
  if (text == nullptr) return expected(path, key, "a string");
  out.emplace(text->data(), text->size());
  return std::nullopt;
}

Failure read_required_string(const JsonObject& object, std::string_view key, std::string_view path,
                             std::string& out) {
  std::optional<std::string> value;
  DEEPINFER_CONVERT_TRY(read_string(object, key, path, value));
  if (!value) return missing_field(path, key);
  out = std::move(*value);
  return std::nullopt;
}

Failure read_bool(const JsonObject& object, std::string_view key, std::string_view path,
                  std::optional<bool>& out) {
  out.reset();
  const Json* value = find_field(object, key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_bool()) return expected(path, key, "a boolean");
  out = value->get_bool();
  return std::nullopt;
}

Failure read_number(const JsonObject& object, std::string_view key, std::string_view path,
                    std::optional<double>& out) {
  out.reset();
  const Json* value = find_field(object, key);
  if (value == nullptr) return std::nullopt;
  if (value->is_double()) {
    out = value->get_double();
  } else if (value->is_int64()) {
    out = static_cast<double>(value->get_int64());
  } else if (value->is_uint64()) {
    out = static_cast<double>(value->get_uint64());
  } else {
    return expected(path, key, "a number");
  }
  return std::nullopt;
}

Failure read_integer(const JsonObject& object, std::string_view key, std::string_view path,
                     std::optional<int64_t>& out) {
  out.reset();
  const Json* value = find_field(object, key);
  if (value == nullptr) return std::nullopt;
  if (value->is_int64()) {
    out = value->get_int64();
  } else if (value->is_uint64()) {
    out = std::numeric_limits<int64_t>::max();  // beyond i64: saturate (still "large")
  } else {
    return expected(path, key, "an integer");
  }
  return std::nullopt;
}

// --- validations ---------------------------------------------------------------------------

Failure validate_tool_name(std::string_view name, std::string_view path) {
  bool valid = !name.empty() && name.size() <= 128;
  for (char c : name) {
    if (!valid) break;
    valid = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '_' || c == '-';
  }
  if (valid) return std::nullopt;
  return bad_request(std::string(path) +
                     ": expected 1-128 ASCII letters, digits, underscores or hyphens");
}

namespace {

// A small structural check standing in for "compiles as JSON Schema": the keywords that
// hold subschemas, names or numbers must have the right shape, and "$ref" must be a local
// JSON pointer that resolves. The wording is ours (the reference prints its schema
// compiler's message after "<path>: ").
class SchemaChecker {
 public:
  explicit SchemaChecker(const Json& root) : root_(root) {}

  std::optional<std::string> check(const Json& schema, const std::string& pointer) {
    if (schema.is_bool()) return std::nullopt;
    const JsonObject* object = schema.if_object();
    if (object == nullptr) return at(pointer, "a schema must be an object or a boolean");
    for (const auto& member : *object) {
      std::string_view key = member.key();
      const Json& value = member.value();
      std::string child = pointer + "/" + escape(key);
      if (key == "type") {
        if (auto error = check_type(value, child)) return error;
      } else if (key == "properties" || key == "patternProperties" || key == "$defs" ||
                 key == "definitions" || key == "dependentSchemas") {
        const JsonObject* map = value.if_object();
        if (map == nullptr) return at(child, "expected an object");
        for (const auto& entry : *map) {
          if (auto error = check(entry.value(), child + "/" + escape(entry.key()))) {
            return error;
          }
        }
      } else if (key == "additionalProperties" || key == "not" || key == "if" || key == "then" ||
                 key == "else" || key == "contains" || key == "propertyNames" ||
                 key == "additionalItems" || key == "unevaluatedItems" ||
                 key == "unevaluatedProperties") {
        if (auto error = check(value, child)) return error;
      } else if (key == "items") {
        if (const JsonArray* list = value.if_array()) {
          if (auto error = check_list(*list, child, false)) return error;
        } else if (auto error = check(value, child)) {
          return error;
        }
      } else if (key == "allOf" || key == "anyOf" || key == "oneOf" || key == "prefixItems") {
        const JsonArray* list = value.if_array();
        if (list == nullptr) return at(child, "expected an array");
        if (auto error = check_list(*list, child, key != "prefixItems")) return error;
      } else if (key == "required") {
        const JsonArray* list = value.if_array();
        if (list == nullptr) return at(child, "expected an array of strings");
        for (const Json& name : *list) {
          if (!name.is_string()) return at(child, "expected an array of strings");
        }
      } else if (key == "enum") {
        if (!value.is_array()) return at(child, "expected an array");
      } else if (key == "minLength" || key == "maxLength" || key == "minItems" ||
                 key == "maxItems" || key == "minProperties" || key == "maxProperties" ||
                 key == "minContains" || key == "maxContains") {
        if (!is_non_negative_integer(value)) return at(child, "expected a non-negative integer");
      } else if (key == "minimum" || key == "maximum" || key == "exclusiveMinimum" ||
                 key == "exclusiveMaximum") {
        if (!value.is_number() && !value.is_bool()) return at(child, "expected a number");
      } else if (key == "multipleOf") {
        if (!value.is_number() || value.to_number<double>() <= 0) {
          return at(child, "expected a number greater than 0");
        }
      } else if (key == "pattern") {
        if (!value.is_string()) return at(child, "expected a string");
      } else if (key == "$ref") {
        if (auto error = check_ref(value, child)) return error;
      }
    }
    return std::nullopt;
  }

 private:
  static std::string escape(std::string_view key) {
    std::string out;
    for (char c : key) {
      if (c == '~') {
        out += "~0";
      } else if (c == '/') {
        out += "~1";
      } else {
        out += c;
      }
    }
    return out;
  }

  static std::optional<std::string> at(const std::string& pointer, std::string_view message) {
    return "invalid JSON Schema at '" + (pointer.empty() ? std::string("#") : "#" + pointer) +
           "': " + std::string(message);
  }

  static bool is_non_negative_integer(const Json& value) {
    if (value.is_uint64()) return true;
    if (value.is_int64()) return value.get_int64() >= 0;
    if (value.is_double()) {
      double d = value.get_double();
      return d >= 0 && std::floor(d) == d;
    }
    return false;
  }

  static bool is_type_name(const Json& value) {
    const JsonString* name = value.if_string();
    if (name == nullptr) return false;
    static constexpr std::string_view kNames[] = {"null",   "boolean", "object", "array",
                                                  "number", "string",  "integer"};
    return std::find(std::begin(kNames), std::end(kNames), std::string_view(*name)) !=
           std::end(kNames);
  }

  static std::optional<std::string> check_type(const Json& value, const std::string& pointer) {
    if (is_type_name(value)) return std::nullopt;
    if (const JsonArray* list = value.if_array()) {
      for (size_t i = 0; i < list->size(); ++i) {
        if (!is_type_name((*list)[i])) return at(pointer, "unknown type name");
        for (size_t j = 0; j < i; ++j) {
          if ((*list)[j] == (*list)[i]) return at(pointer, "type names must be unique");
        }
      }
      return std::nullopt;
    }
    return at(pointer, "unknown type name");
  }

  std::optional<std::string> check_list(const JsonArray& list, const std::string& pointer,
                                        bool non_empty) {
    if (non_empty && list.empty()) return at(pointer, "expected a non-empty array");
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto error = check(list[i], pointer + "/" + std::to_string(i))) return error;
    }
    return std::nullopt;
  }

  std::optional<std::string> check_ref(const Json& value, const std::string& pointer) {
    const JsonString* ref = value.if_string();
    if (ref == nullptr) return at(pointer, "expected a string");
    std::string_view text(*ref);
    if (text.empty() || text[0] != '#') return at(pointer, "only local references are allowed");
    if (text.size() == 1) return std::nullopt;
    if (text[1] != '/') return std::nullopt;  // "#anchor": accepted as-is
    boost::system::error_code ec;
    const Json* target = root_.find_pointer(text.substr(1), ec);
    if (target == nullptr) return at(pointer, "unresolved reference '" + std::string(text) + "'");
    return std::nullopt;
  }

  const Json& root_;
};

}  // namespace

Failure validate_tool_parameters(const Json& schema, std::string_view path) {
  const JsonObject* object = schema.if_object();
  const Json* type = object ? object->if_contains("type") : nullptr;
  if (type == nullptr || !type->is_string() || type->get_string() != "object") {
    return bad_request(std::string(path) + " must be a JSON Schema of type object");
  }
  SchemaChecker checker(schema);
  if (auto error = checker.check(schema, "")) {
    return bad_request(std::string(path) + ": " + *error);
  }
  return std::nullopt;
}

Failure read_sampling(const JsonObject& body, std::string_view max_tokens_field,
                      InferenceOptions& options) {
  std::optional<int64_t> max_tokens;
  DEEPINFER_CONVERT_TRY(read_integer(body, max_tokens_field, "", max_tokens));
  if (max_tokens && *max_tokens <= 0) {
    return bad_request(std::string(max_tokens_field) + " must be greater than zero");
  }
  std::optional<double> temperature;
  std::optional<double> top_p;
  DEEPINFER_CONVERT_TRY(read_number(body, "temperature", "", temperature));
  DEEPINFER_CONVERT_TRY(read_number(body, "top_p", "", top_p));
  // Values are kept as f32 (api spec §2), so the range checks run on the f32 value.
  std::optional<float> temperature32;
  std::optional<float> top_p32;
  if (temperature) temperature32 = static_cast<float>(*temperature);
  if (top_p) top_p32 = static_cast<float>(*top_p);
  if (temperature32 && !(*temperature32 >= 0.0f && *temperature32 <= 2.0f)) {
    return bad_request("temperature must be in [0, 2]");
  }
  if (top_p32 && !(*top_p32 > 0.0f && *top_p32 <= 1.0f)) {
    return bad_request("top_p must be in (0, 1]");
  }
  options.max_tokens = max_tokens;
  options.temperature = temperature32;
  options.top_p = top_p32;
  return std::nullopt;
}

// --- images --------------------------------------------------------------------------------

namespace {

bool is_http_url(std::string_view url) {
  if (url.size() < 4) return false;
  static constexpr std::string_view kHttp = "http";
  for (size_t i = 0; i < 4; ++i) {
    char c = url[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kHttp[i]) return false;
  }
  return true;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// Canonical MIME of an accepted image media type, or "" (parameters after ';' ignored,
// case-insensitive, "image/jpg" = "image/jpeg").
std::string_view canonical_image_mime(std::string_view mime) {
  mime = trim(mime.substr(0, mime.find(';')));
  size_t slash = mime.find('/');
  if (slash == std::string_view::npos || !iequals(mime.substr(0, slash), "image")) return "";
  std::string_view subtype = mime.substr(slash + 1);
  if (iequals(subtype, "jpeg") || iequals(subtype, "jpg")) return "image/jpeg";
  if (iequals(subtype, "png")) return "image/png";
  if (iequals(subtype, "gif")) return "image/gif";
  if (iequals(subtype, "webp")) return "image/webp";
  return "";
}

// Trailing '=' padding replaced by the canonical amount; unpadded payloads kept as given.
std::string normalize_base64_padding(std::string_view data) {
  if (data.empty() || data.back() != '=') return std::string(data);
  std::string_view unpadded = data;
  while (!unpadded.empty() && unpadded.back() == '=') unpadded.remove_suffix(1);
  size_t remainder = unpadded.size() % 4;
  if (remainder == 1) return std::string(data);
  std::string out(unpadded);
  out.append((4 - remainder) % 4, '=');
  return out;
}

bool is_valid_standard_base64(std::string_view data) {
  // Standard alphabet with padding: the length must be a multiple of 4.
  if (data.size() % 4 != 0) return false;
  size_t padding = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    char c = data[i];
    bool symbol = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '+' || c == '/';
    if (c == '=') {
      if (i + 2 < data.size()) return false;
      ++padding;
    } else if (!symbol || padding > 0) {
      return false;
    }
  }
  return padding <= 2;
}

}  // namespace

Conv<ImageSource> external_image_source(std::string_view url, ImageDetail detail,
                                        std::string_view path) {
  if (!is_http_url(url)) {
    std::string quoted;
    append_json_escaped(quoted, url);
    return bad_request(std::string(path) + ": invalid url: \"" + quoted + "\"");
  }
  if (url.size() > kMaxImageUrlBytes) {
    return bad_request(std::string(path) + ": external link length " + std::to_string(url.size()) +
                       " too long, max link length " + std::to_string(kMaxImageUrlBytes) +
                       ". Consider passing file data directly with base64 data url instead.");
  }
  return ImageSource{ImageSource::Kind::Url, std::string(url), "", detail};
}

Conv<ImageSource> image_url_source(std::string_view url, ImageDetail detail,
                                   std::string_view path) {
  if (is_http_url(url)) return external_image_source(url, detail, path);
  if (url.find("base64,") != std::string_view::npos) {
    return ImageSource{ImageSource::Kind::DataUrl, std::string(url), "", detail};
  }
  return bad_request(std::string(path) + ": Unsupported image_url format");
}

Conv<ImageSource> base64_image_source(std::string_view media_type, std::string_view data,
                                      std::string_view path) {
  std::string_view mime = canonical_image_mime(media_type);
  if (mime.empty()) {
    return bad_request(std::string(path) +
                       ": You have uploaded an unsupported image. Please make sure your image is "
                       "valid and has one of the following formats: webp, png, jpeg, and gif.");
  }
  std::string payload = normalize_base64_padding(data);
  if (!is_valid_standard_base64(payload)) {
    return bad_request(std::string(path) + ": base64 decode error");
  }
  std::string url = "data:" + std::string(mime) + ";base64," + payload;
  return ImageSource{ImageSource::Kind::DataUrl, std::move(url), "", ImageDetail::High};
}

ConversionError file_id_unsupported(std::string_view path) {
  return bad_request(std::string(path) +
                     ": file_id is not supported. Pass the image as a base64 data url instead.");
}

ConversionError image_not_allowed(std::string_view role) {
  return bad_request("Image in " + std::string(role) + " message is unsupported");
}

Failure read_image_detail(const JsonObject& object, std::string_view path, ImageDetail& out) {
  std::optional<std::string> detail;
  DEEPINFER_CONVERT_TRY(read_string(object, "detail", path, detail));
  out = ImageDetail::High;
  if (!detail) return std::nullopt;
  if (*detail == "low") {
    out = ImageDetail::Low;
  } else if (*detail == "high") {
    out = ImageDetail::High;
  } else if (*detail == "original") {
    out = ImageDetail::Original;
  } else if (*detail == "auto") {
    out = ImageDetail::Auto;
  } else {
    return unknown_variant(field_path(path, "detail"), *detail,
                           {"low", "high", "original", "auto"});
  }
  return std::nullopt;
}

// --- conversation checks -------------------------------------------------------------------

bool contains_json_word(const std::vector<Message>& messages) {
  for (const Message& message : messages) {
    const std::string& text = message.content;
    for (size_t i = 0; i + 4 <= text.size(); ++i) {
      if (iequals(std::string_view(text).substr(i, 4), "json")) return true;
    }
  }
  return false;
}

namespace {

size_t count_placeholders(std::string_view text) {
  size_t count = 0;
  for (size_t pos = text.find(kImagePlaceholder); pos != std::string_view::npos;
       pos = text.find(kImagePlaceholder, pos + kImagePlaceholder.size())) {
    ++count;
  }
  return count;
}

bool spells_placeholder(std::string_view text) {
  return text.find(kImagePlaceholder) != std::string_view::npos;
}

}  // namespace

Failure validate_placeholders(const Conversation& conversation) {
  static const std::string kDetail =
      "The sub-string \"<｜image｜>\" in your input is not allowed for this API. Please remove "
      "\"<｜image｜>\" from your input and try again.";
  for (const Message& message : conversation.messages) {
    size_t images = 0;
    if (message.role == Role::User || message.role == Role::Tool) {
      images = message.image_sources.size();
    }
    if (count_placeholders(message.content) != images ||
        spells_placeholder(message.reasoning_content) || spells_placeholder(message.tool_call_id)) {
      return bad_request(kDetail);
    }
    for (const ToolCall& call : message.tool_calls) {
      if (spells_placeholder(call.name) || spells_placeholder(call.arguments)) {
        return bad_request(kDetail);
      }
    }
  }
  for (const ToolDefinition& tool : conversation.tools) {
    if (spells_placeholder(tool.name) ||
        (tool.description && spells_placeholder(*tool.description)) ||
        spells_placeholder(to_python_json(tool.parameters))) {
      return bad_request(kDetail);
    }
  }
  return std::nullopt;
}

std::optional<OpenAiEffort> openai_effort(std::string_view value) {
  if (value == "none") return OpenAiEffort{false, std::nullopt};
  if (value == "minimal" || value == "low") return OpenAiEffort{true, ReasoningEffort::Low};
  if (value == "medium" || value == "high") return OpenAiEffort{true, ReasoningEffort::High};
  if (value == "xhigh") return OpenAiEffort{true, ReasoningEffort::Xhigh};
  if (value == "max") return OpenAiEffort{true, ReasoningEffort::Max};
  return std::nullopt;
}

void keep_only_tool(std::vector<ToolDefinition>& tools, std::string_view name) {
  std::erase_if(tools, [&](const ToolDefinition& tool) { return tool.name != name; });
}

bool has_tool(const std::vector<ToolDefinition>& tools, std::string_view name) {
  return std::any_of(tools.begin(), tools.end(),
                     [&](const ToolDefinition& tool) { return tool.name == name; });
}

Failure read_tool_choice_mode(const JsonString& text, std::optional<std::string>& mode) {
  mode.emplace(text.data(), text.size());
  if (*mode != "none" && *mode != "auto" && *mode != "required") {
    return unknown_variant("tool_choice", *mode, {"none", "auto", "required"});
  }
  return std::nullopt;
}

Failure resolve_tool_choice(const std::optional<std::string>& mode,
                            const std::optional<std::string>& named,
                            const std::set<std::string>& names, bool thinking,
                            Conversation& conversation) {
  bool required = mode == "required";
  if (named) {
    if (names.count(*named) == 0) {
      return bad_request("tool_choice: no tool named '" + *named + "' was specified");
    }
    keep_only_tool(conversation.tools, *named);
    required = true;
  }
  if (required && thinking) return bad_request("Thinking mode does not support this tool_choice");
  conversation.tool_choice = required ? ToolChoice::Required : ToolChoice::Auto;
  return std::nullopt;
}

Conv<ContentParts> read_content(const Json& value, std::string_view value_path,
                                std::string_view not_array, std::string_view block_prefix,
                                const ContentBlockReader& block) {
  ContentParts out;
  if (const JsonString* text = value.if_string()) {
    out.text.assign(text->data(), text->size());
    return out;
  }
  const JsonArray* blocks = value.if_array();
  if (blocks == nullptr) {
    return bad_request(std::string(value_path) + ": " + std::string(not_array));
  }
  std::vector<std::string> texts;
  texts.reserve(blocks->size());
  for (size_t j = 0; j < blocks->size(); ++j) {
    std::string path = index_path(block_prefix, j);
    const JsonObject* object = nullptr;
    std::string type;
    DEEPINFER_CONVERT_TRY(expect_typed_object((*blocks)[j], path, object, type));
    ContentParts piece;
    DEEPINFER_CONVERT_TRY(block(*object, type, path, piece));
    texts.push_back(std::move(piece.text));
    for (ImageSource& image : piece.images) out.images.push_back(std::move(image));
  }
  out.text = join(texts, "\n\n");
  return out;
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += separator;
    out += parts[i];
  }
  return out;
}

Message make_message(Role role, std::string content, std::vector<ImageSource> images,
                     std::string tool_call_id) {
  Message message;
  message.role = role;
  message.content = std::move(content);
  message.image_sources = std::move(images);
  message.tool_call_id = std::move(tool_call_id);
  return message;
}

}  // namespace deepinfer::recipe::convert
