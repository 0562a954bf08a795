#include "recipe/convert.h"

#include <exception>

#include "recipe/convert_common.h"

namespace deepinfer::recipe {

Result<ConversationRequest, ConversionError> convert_request(Protocol protocol, const Json& body,
                                                             const ConversionOptions& options) {
  const JsonObject* object = body.if_object();
  if (object == nullptr) return convert::bad_request("request body must be a JSON object");
  // The adapters report every problem as a value; this guard keeps an unexpected library
  // exception (e.g. allocation failure) from crossing the module edge.
  try {
    switch (protocol) {
      case Protocol::ChatCompletions:
        return convert::convert_chat(*object, options);
      case Protocol::Responses:
        return convert::convert_responses(*object, options);
      case Protocol::Messages:
        return convert::convert_messages(*object, options);
    }
  } catch (const std::exception& error) {
    return convert::internal_error(std::string("request conversion failed: ") + error.what());
  }
  return convert::internal_error("unknown protocol");
}

std::optional<Protocol> protocol_from_name(std::string_view name) {
  if (name == "chat_completions") return Protocol::ChatCompletions;
  if (name == "responses") return Protocol::Responses;
  if (name == "messages") return Protocol::Messages;
  return std::nullopt;
}

}  // namespace deepinfer::recipe
