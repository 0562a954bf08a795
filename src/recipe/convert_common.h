// Shared pieces of the three request adapters (api spec §2): typed JSON field readers that turn
// wrong types into BadRequest errors, the adapter-independent validations (tool names, schemas,
// sampling ranges, image URLs, the image placeholder, the json-mode word) and effort mapping.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/result.h"
#include "recipe/conversation.h"

namespace deepinfer::recipe::convert {

inline constexpr std::string_view kImagePlaceholder = "<｜image｜>";
inline constexpr std::string_view kUnsupportedDocument = "[Unsupported Document]";
inline constexpr size_t kMaxImageUrlBytes = 8192;
inline constexpr size_t kMaxStopSequences = 16;

template <class T>
using Conv = Result<T, ConversionError>;
// A step that either succeeds (nullopt) or fails with an error.
using Failure = std::optional<ConversionError>;

ConversionError bad_request(std::string detail);
ConversionError internal_error(std::string detail);

// Returns the failure of `expr` (a Failure) from the enclosing function.
#define DEEPINFER_CONVERT_TRY(expr)                                \
  do {                                                             \
    if (::deepinfer::recipe::convert::Failure failure_ = (expr)) { \
      return std::move(*failure_);                                 \
    }                                                              \
  } while (0)

// Joins a path and a field: ("", "model") → "model", ("messages[0]", "role") →
// "messages[0].role".
std::string field_path(std::string_view path, std::string_view key);
std::string index_path(std::string_view path, size_t index);  // "messages" → "messages[3]"

// --- typed readers -----------------------------------------------------------------------
// A field that is absent or JSON null counts as absent. Wrong types fail with
// "<path.key>: expected <kind>" (our wording; the spec leaves it open). Required fields fail
// with "missing field `<key>`" (prefixed by "<path>: " when nested), the serde wording of the
// reference implementation.

const Json* find_field(const JsonObject& object, std::string_view key);
Failure expect_object(const Json& value, std::string_view path, const JsonObject*& out);
// A content block or tool entry: an object with a required string "type".
Failure expect_typed_object(const Json& value, std::string_view path, const JsonObject*& out,
                            std::string& type);
Failure read_object(const JsonObject& object, std::string_view key, std::string_view path,
                    const JsonObject*& out);
Failure read_array(const JsonObject& object, std::string_view key, std::string_view path,
                   const JsonArray*& out);
Failure read_string(const JsonObject& object, std::string_view key, std::string_view path,
                    std::optional<std::string>& out);
Failure read_required_string(const JsonObject& object, std::string_view key, std::string_view path,
                             std::string& out);
Failure read_bool(const JsonObject& object, std::string_view key, std::string_view path,
                  std::optional<bool>& out);
Failure read_number(const JsonObject& object, std::string_view key, std::string_view path,
                    std::optional<double>& out);
Failure read_integer(const JsonObject& object, std::string_view key, std::string_view path,
                     std::optional<int64_t>& out);
Failure missing_field(std::string_view path, std::string_view key);
// "<path>: unknown variant `v`, expected one of `a`, `b`" (serde wording).
ConversionError unknown_variant(std::string_view path, std::string_view value,
                                std::initializer_list<std::string_view> expected);

// --- validations (api spec §2) -------------------------------------------------------------

Failure validate_tool_name(std::string_view name, std::string_view path);
// `<path> must be a JSON Schema of type object` unless an object with "type":"object" whose
// schema keywords are well-formed (local "#" references only).
Failure validate_tool_parameters(const Json& schema, std::string_view path);
// temperature ∈ [0,2], top_p ∈ (0,1] (checked as f32) and `<field>` > 0; fills `options`.
Failure read_sampling(const JsonObject& body, std::string_view max_tokens_field,
                      InferenceOptions& options);

// Image sources (encoding spec §3.10). `path` is the error prefix.
Conv<ImageSource> external_image_source(std::string_view url, ImageDetail detail,
                                        std::string_view path);
Conv<ImageSource> image_url_source(std::string_view url, ImageDetail detail, std::string_view path);
// Messages base64 images: media type jpeg/jpg/png/gif/webp, padding normalized.
Conv<ImageSource> base64_image_source(std::string_view media_type, std::string_view data,
                                      std::string_view path);
ConversionError file_id_unsupported(std::string_view path);
ConversionError image_not_allowed(std::string_view role);
// Reads an optional "detail" field (low|high|original|auto; default high).
Failure read_image_detail(const JsonObject& object, std::string_view path, ImageDetail& out);

// True when some message content contains "json" (ASCII case-insensitive).
bool contains_json_word(const std::vector<Message>& messages);

// Placeholder hygiene (encoding spec §5.5), checked on the converted conversation: every
// User/Tool content holds exactly one placeholder per image source, every other text none,
// and no tool definition or historical call spells it.
Failure validate_placeholders(const Conversation& conversation);

// OpenAI effort names (§2 table): nullopt for "none"; error for unknown names.
struct OpenAiEffort {
  bool thinking = true;
  std::optional<ReasoningEffort> effort;
};
std::optional<OpenAiEffort> openai_effort(std::string_view value);

// Shared first stage of tool_choice handling: keeps only the tool named `name`.
void keep_only_tool(std::vector<ToolDefinition>& tools, std::string_view name);
bool has_tool(const std::vector<ToolDefinition>& tools, std::string_view name);

// OpenAI tool_choice (Chat and Responses). A string must be "none", "auto" or "required"
// (`mode`). Once the tools are read (`names`): a `named` tool must be declared and is kept
// alone; named or "required" → Required (an error in thinking mode), otherwise Auto.
Failure read_tool_choice_mode(const JsonString& text, std::optional<std::string>& mode);
Failure resolve_tool_choice(const std::optional<std::string>& mode,
                            const std::optional<std::string>& named,
                            const std::set<std::string>& names, bool thinking,
                            Conversation& conversation);

// --- content (Chat, Responses, Messages) -------------------------------------------------

// A message content's text and the images its placeholders stand for.
struct ContentParts {
  std::string text;
  std::vector<ImageSource> images;
};
// One typed block → `piece` (its text; images appended).
using ContentBlockReader = std::function<Failure(const JsonObject& block, const std::string& type,
                                                 const std::string& path, ContentParts& piece)>;
// A content value: a string is the text; an array holds typed blocks at "<block_prefix>[j]",
// each read by `block`, their texts joined with "\n\n". Any other value fails with
// "<value_path>: <not_array>".
Conv<ContentParts> read_content(const Json& value, std::string_view value_path,
                                std::string_view not_array, std::string_view block_prefix,
                                const ContentBlockReader& block);

std::string join(const std::vector<std::string>& parts, std::string_view separator);

Message make_message(Role role, std::string content, std::vector<ImageSource> images = {},
                     std::string tool_call_id = {});

// The Responses `apply_patch` custom tool as a function tool (convert_apply_patch.cpp).
extern const char* const kApplyPatchDescription;
extern const char* const kApplyPatchParameters;  // JSON text, key order as in the reference

// The three adapters (convert_chat.cpp, convert_responses.cpp, convert_messages.cpp).
Conv<ConversationRequest> convert_chat(const JsonObject& body, const ConversionOptions& options);
Conv<ConversationRequest> convert_responses(const JsonObject& body,
                                            const ConversionOptions& options);
Conv<ConversationRequest> convert_messages(const JsonObject& body,
                                           const ConversionOptions& options);

}  // namespace deepinfer::recipe::convert
