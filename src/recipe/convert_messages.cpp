// Anthropic Messages request → ConversationRequest (api spec §5, §5.1).
#include "recipe/convert_common.h"

namespace deepinfer::recipe::convert {

Conv<ConversationRequest> convert_messages(const JsonObject&, const ConversionOptions&) {
  return internal_error("Messages conversion is not implemented yet");
}

}  // namespace deepinfer::recipe::convert
