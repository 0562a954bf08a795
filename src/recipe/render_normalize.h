// Message normalization before rendering (encoding spec §3.2): V4 system merge/demotion, user
// message merging, and stable reordering of tool results into the order of the calls.
#pragma once

#include <vector>

#include "recipe/conversation.h"
#include "recipe/render.h"

namespace deepinfer::recipe {

// Returns the normalized list N of §3.2 (the input is not modified).
std::vector<Message> normalize_messages(const std::vector<Message>& messages,
                                        EncodingVersion version);

}  // namespace deepinfer::recipe
