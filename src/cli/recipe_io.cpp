#include "cli/recipe_io.h"

#include <iostream>

#include "cli/command.h"
#include "common/io.h"
#include "recipe/convert.h"

namespace deepinfer::cli {

RecipeError invalid_request(std::string message) {
  return RecipeError{"invalid_request_error", std::move(message)};
}

Result<RecipeEnvelope, RecipeError> parse_recipe_envelope(std::string_view text) {
  auto parsed = parse_json(text);
  if (!parsed.ok()) return invalid_request("stdin is not valid JSON: " + parsed.error().message);
  if (!parsed.value().is_object()) return invalid_request("stdin must be a JSON object");
  RecipeEnvelope envelope;
  envelope.body = std::move(parsed.value().as_object());
  const JsonObject& body = envelope.body;

  const auto* protocol = body.if_contains("protocol");
  if (protocol == nullptr) return invalid_request("missing field `protocol`");
  if (!protocol->is_string()) return invalid_request("field `protocol` must be a string");
  const auto protocol_value = recipe::protocol_from_name(protocol->as_string());
  if (!protocol_value) {
    return invalid_request("unknown protocol `" + std::string(protocol->as_string()) +
                           "` (expected chat_completions, responses or messages)");
  }
  envelope.protocol = *protocol_value;

  if (const auto* encoding = body.if_contains("encoding")) {
    if (!encoding->is_string()) return invalid_request("field `encoding` must be a string");
    const auto version = recipe::encoding_from_name(encoding->as_string());
    if (!version) {
      return invalid_request("unknown encoding `" + std::string(encoding->as_string()) +
                             "` (expected v4 or v41)");
    }
    envelope.encoding = *version;
  }

  const auto* request = body.if_contains("request");
  if (request == nullptr) return invalid_request("missing field `request`");
  envelope.request = *request;
  return envelope;
}

Result<RecipeEnvelope, RecipeError> read_recipe_envelope(std::istream& in) {
  return parse_recipe_envelope(read_all(in));
}

RecipeError to_recipe_error(const recipe::ConversionError& error) {
  return RecipeError{error.kind == recipe::ConversionError::Kind::Internal
                         ? "internal_error"
                         : "invalid_request_error",
                     error.detail};
}

Result<recipe::ConversationRequest, RecipeError> convert_envelope(const RecipeEnvelope& envelope) {
  auto converted = recipe::convert_request(envelope.protocol, envelope.request);
  if (!converted.ok()) return to_recipe_error(converted.error());
  return std::move(converted).value();
}

Json recipe_error_json(const RecipeError& error) {
  JsonObject inner;
  inner["type"] = error.type;
  inner["message"] = error.message;
  JsonObject outer;
  outer["error"] = std::move(inner);
  return outer;
}

void print_json_line(std::ostream& out, const Json& value) {
  out << to_json(value) << '\n';
  out.flush();
}

void fail_recipe(const RecipeError& error) {
  print_json_line(std::cout, recipe_error_json(error));
  throw CliExit{1};
}

}  // namespace deepinfer::cli
