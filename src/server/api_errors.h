// Error bodies in each API's own shape. OpenAI (Chat, Responses, Completions):
// {"error":{"message","type","param":null,"code"}}; Anthropic Messages:
// {"type":"error","error":{"type","message"}}. Status codes map to the API's error types.
#pragma once

#include <string>
#include <string_view>

#include "recipe/conversation.h"
#include "server/http_types.h"

namespace deepinfer::server {

enum class ApiFlavor { OpenAI, Anthropic };

// The API whose error shape a request path expects (/v1/messages → Anthropic).
ApiFlavor flavor_for_path(std::string_view path);
// The error shape of a generation API (Messages → Anthropic, the others → OpenAI).
ApiFlavor flavor_for(recipe::Protocol protocol);

HttpResponse api_error(ApiFlavor flavor, int status, std::string_view message,
                       std::string_view openai_type = {});

}  // namespace deepinfer::server
