// API request bodies → ConversationRequest (api spec §3–§5). One entry point for the three
// protocols; every validation failure is a ConversionError with the spec's exact detail string.
// Wrong JSON types never throw: they fail as BadRequest ("<path>: expected <kind>").
#pragma once

#include <optional>
#include <string_view>

#include "common/json.h"
#include "common/result.h"
#include "recipe/conversation.h"

namespace deepinfer::recipe {

Result<ConversationRequest, ConversionError> convert_request(
    Protocol protocol, const Json& body, const ConversionOptions& options = {});

// "chat_completions" | "responses" | "messages"
std::optional<Protocol> protocol_from_name(std::string_view name);

}  // namespace deepinfer::recipe
