#include "server/logprobs.h"

#include <algorithm>
#include <string>

namespace deepinfer::server {
namespace {

// Length of the valid UTF-8 sequence at s[i], or 0.
size_t utf8_length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  if (n == 2 && c < 0xC2) return 0;  // overlong
  if (n == 3) {
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0)) return 0;
  }
  if (n == 4) {
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if ((c == 0xF0 && c1 < 0x90) || c > 0xF4 || (c == 0xF4 && c1 >= 0x90)) return 0;
  }
  return n;
}

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (const size_t n = utf8_length(s, i)) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

}  // namespace

Json LogprobsCollector::entry(int32_t token, float logprob) const {
  const std::string_view raw = tokenizer_.token_bytes(token);
  JsonObject e;
  e["token"] = valid_utf8(raw);
  e["logprob"] = static_cast<double>(logprob);
  JsonArray bytes;
  for (char c : raw) bytes.push_back(static_cast<int64_t>(static_cast<unsigned char>(c)));
  e["bytes"] = std::move(bytes);
  return e;
}

Json LogprobsCollector::to_json() const {
  JsonArray content;
  content.reserve(samples_.size());
  for (const auto& s : samples_) {
    Json e = entry(s.token, s.logprob);
    JsonArray top;
    const int n = std::min(top_, s.num_top);
    for (int k = 0; k < n; ++k) top.push_back(entry(s.top[k].token, s.top[k].logprob));
    e.as_object()["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  JsonObject out;
  out["content"] = std::move(content);
  return out;
}

}  // namespace deepinfer::server
