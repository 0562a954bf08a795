// OpenAI Responses request → ConversationRequest (api spec §4, §4.1).
#include "recipe/convert_common.h"

namespace deepinfer::recipe::convert {

Conv<ConversationRequest> convert_responses(const JsonObject&, const ConversionOptions&) {
  return internal_error("Responses conversion is not implemented yet");
}

}  // namespace deepinfer::recipe::convert
