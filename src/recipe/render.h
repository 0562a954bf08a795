// Conversation → DeepSeek V4 / V4.1 prompt text (encoding spec §3), byte-exact with
// deepseek-recipe. The result marks the byte ranges that are template special tokens (§5):
// only those become special ids; all request text stays plain even if it spells one.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "recipe/conversation.h"

namespace deepinfer::recipe {

enum class EncodingVersion { V4, V41 };

struct SpecialSpan {
  size_t begin = 0;  // byte offset into prompt
  size_t end = 0;    // one past the last byte
};

struct RenderedPrompt {
  std::string prompt;
  std::vector<SpecialSpan> special_spans;  // ascending, non-overlapping
  std::vector<ImageSource> image_sources;  // one per <｜image｜> placeholder, in order
};

RenderedPrompt render_prompt(const Conversation& conversation, EncodingVersion version);

// "v4" | "v41"
std::optional<EncodingVersion> encoding_from_name(std::string_view name);

}  // namespace deepinfer::recipe
