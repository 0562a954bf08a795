// UTF-8 validation and lossy conversion (see utf8.h).
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

// Valid range of the second byte for a given lead byte (Unicode Table 3-7); the remaining
// continuation bytes are always 0x80..0xBF.
struct LeadInfo {
  uint8_t length;  // 0: invalid lead
  uint8_t lo, hi;  // second-byte range
};

LeadInfo lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b < 0xED) return {3, 0x80, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Number of bytes at s[i..] that form a valid prefix of a sequence (<= full length).
size_t valid_prefix(std::string_view s, size_t i, LeadInfo info) {
  size_t n = 1;
  for (size_t k = 1; k < info.length && i + k < s.size(); ++k) {
    const auto c = static_cast<uint8_t>(s[i + k]);
    const bool ok = k == 1 ? (c >= info.lo && c <= info.hi) : (c >= 0x80 && c <= 0xBF);
    if (!ok) break;
    ++n;
  }
  return n;
}

}  // namespace

size_t utf8_sequence_length(std::string_view s, size_t i) {
  const LeadInfo info = lead_info(static_cast<uint8_t>(s[i]));
  if (info.length == 0) return 0;
  if (info.length == 1) return 1;
  return valid_prefix(s, i, info) == info.length ? info.length : 0;
}

size_t utf8_error_offset(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return s.size();
}

bool is_valid_utf8(std::string_view s) { return utf8_error_offset(s) == s.size(); }

uint32_t utf8_decode(std::string_view s, size_t i, size_t* len) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    *len = 1;
    return b0;
  }
  const size_t n = b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
  uint32_t cp = b0 & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  *len = n;
  return cp;
}

size_t utf8_invalid_subpart_length(std::string_view s, size_t i) {
  const LeadInfo info = lead_info(static_cast<uint8_t>(s[i]));
  if (info.length <= 1) return 1;
  return valid_prefix(s, i, info);
}

bool utf8_is_incomplete_prefix(std::string_view s, size_t i) {
  const LeadInfo info = lead_info(static_cast<uint8_t>(s[i]));
  if (info.length <= 1) return false;
  const size_t n = valid_prefix(s, i, info);
  return n < info.length && i + n == s.size();
}

void append_utf8_lossy(std::string_view s, std::string& out) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    while (j < s.size()) {
      if (static_cast<uint8_t>(s[j]) < 0x80) {
        ++j;
        continue;
      }
      const size_t n = utf8_sequence_length(s, j);
      if (n == 0) break;
      j += n;
    }
    out.append(s.data() + i, j - i);
    if (j == s.size()) return;
    out.append("\xEF\xBF\xBD");
    i = j + utf8_invalid_subpart_length(s, j);
  }
}

}  // namespace deepinfer::tokenizer
