// Reasoning-effort prefix written before the first message in thinking mode (encoding spec §3.5):
// V4.1 a numeric budget line, V4 the 0731-checkpoint prose table. Plain template text.
#pragma once

#include <optional>
#include <string_view>

#include "recipe/conversation.h"
#include "recipe/render.h"

namespace deepinfer::recipe {

// The prefix for message 0 when thinking is on ("" for V4 Low). Static storage.
std::string_view effort_prefix(EncodingVersion version, std::optional<ReasoningEffort> effort);

}  // namespace deepinfer::recipe
