// Shared stdin/stdout plumbing of the `deepinfer recipe ...` subcommands: the JSON envelope they
// read on stdin ({"protocol", "encoding"?, "request", ...}) and the one error object they print
// ({"error":{"type","message"}} on stdout, exit status 1).
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>

#include "common/json.h"
#include "common/result.h"
#include "recipe/conversation.h"
#include "recipe/render.h"

namespace deepinfer::cli {

// What a recipe subcommand reports on failure. `type` is "invalid_request_error" for anything
// wrong with the input and "internal_error" for conversion failures that are not the caller's.
struct RecipeError {
  std::string type;
  std::string message;
};

RecipeError invalid_request(std::string message);

struct RecipeEnvelope {
  JsonObject body;  // the whole stdin object; commands read their own extra fields
  recipe::Protocol protocol = recipe::Protocol::ChatCompletions;
  recipe::EncodingVersion encoding = recipe::EncodingVersion::V41;  // "encoding", default "v41"
  Json request;  // "request": the API request body, as given
};

// Parses the envelope: one JSON object with "protocol" ("chat_completions" | "responses" |
// "messages"), optional "encoding" ("v4" | "v41", default "v41") and "request" (the body; its
// shape is checked by the conversion). Malformed JSON, a missing or ill-typed field or an unknown
// name is an invalid_request_error.
Result<RecipeEnvelope, RecipeError> parse_recipe_envelope(std::string_view text);

// Reads all of `in` and parses it as above.
Result<RecipeEnvelope, RecipeError> read_recipe_envelope(std::istream& in);

// ConversionError → RecipeError (BadRequest → invalid_request_error, Internal → internal_error).
RecipeError to_recipe_error(const recipe::ConversionError& error);

// recipe::convert_request on the envelope's request with default options.
Result<recipe::ConversationRequest, RecipeError> convert_envelope(const RecipeEnvelope& envelope);

// {"error":{"type":...,"message":...}}
Json recipe_error_json(const RecipeError& error);

// Writes `value` as compact JSON plus a newline.
void print_json_line(std::ostream& out, const Json& value);

// Prints the error object on stdout and throws CliExit{1}.
[[noreturn]] void fail_recipe(const RecipeError& error);

}  // namespace deepinfer::cli
