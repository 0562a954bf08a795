// Prompt text builder for the V4 / V4.1 renderer: appends plain text or a special-token span
// (encoding spec §5.1) and records the byte range of every special span, ascending and
// non-overlapping by construction. Also the special-token spellings the template writes (§1).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "recipe/render.h"

namespace deepinfer::recipe {

inline constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kSystem = "<｜System｜>";
inline constexpr std::string_view kUser = "<｜User｜>";
inline constexpr std::string_view kAssistant = "<｜Assistant｜>";
inline constexpr std::string_view kThinkBegin = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kDsml = "｜DSML｜";
inline constexpr std::string_view kLatestReminder = "<｜latest_reminder｜>";
inline constexpr std::string_view kImage = "<｜image｜>";

// Constant template text with its special spans precomputed (offsets relative to `text`).
struct MarkedText {
  std::string text;
  std::vector<SpecialSpan> spans;
};

// Marks every `｜DSML｜`, `<think>` and `</think>` in template-authored text. Never call it on
// request data: request text is always plain.
MarkedText mark_template_text(std::string text);

class PromptWriter {
 public:
  explicit PromptWriter(RenderedPrompt& out) : text_(out.prompt), spans_(out.special_spans) {}

  void plain(std::string_view s) { text_.append(s); }
  void special(std::string_view s) {
    spans_.push_back({text_.size(), text_.size() + s.size()});
    text_.append(s);
  }
  void marked(const MarkedText& t) {
    const size_t base = text_.size();
    for (const auto& span : t.spans) spans_.push_back({base + span.begin, base + span.end});
    text_.append(t.text);
  }
  // Plain text in which the first `placeholders` spellings of `<｜image｜>` are special (they
  // stand for the message's image sources); any further spelling stays plain.
  void content_with_images(std::string_view s, size_t placeholders);

  // Direct access for plain appends by serializers (python_json.h).
  std::string& text() { return text_; }

 private:
  std::string& text_;
  std::vector<SpecialSpan>& spans_;
};

}  // namespace deepinfer::recipe
