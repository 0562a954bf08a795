#include "recipe/render_writer.h"

namespace deepinfer::recipe {

MarkedText mark_template_text(std::string text) {
  MarkedText out;
  const std::string_view view = text;
  size_t i = 0;
  while (i < view.size()) {
    size_t len = 0;
    for (std::string_view token : {kThinkEnd, kThinkBegin, kDsml}) {
      if (view.substr(i, token.size()) == token) {
        len = token.size();
        break;
      }
    }
    if (len == 0) {
      ++i;
      continue;
    }
    out.spans.push_back({i, i + len});
    i += len;
  }
  out.text = std::move(text);
  return out;
}

void PromptWriter::content_with_images(std::string_view s, size_t placeholders) {
  while (placeholders > 0) {
    const size_t at = s.find(kImage);
    if (at == std::string_view::npos) break;
    plain(s.substr(0, at));
    special(kImage);
    s.remove_prefix(at + kImage.size());
    --placeholders;
  }
  plain(s);
}

}  // namespace deepinfer::recipe
