// Byte-level alphabet tables (see byte_level.h).
#include "tokenizer/byte_level.h"

#include "common/utf8.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

struct Tables {
  std::array<uint32_t, 256> cp{};
  std::array<std::string, 256> text;
  std::array<int16_t, 324> byte{};  // code points used are < 324

  Tables() {
    byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      cp[b] = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + extra++);
      byte[cp[b]] = static_cast<int16_t>(b);
      append_utf8(text[b], cp[b]);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t b) { return tables().cp[b]; }

std::string_view byte_to_text(uint8_t b) { return tables().text[b]; }

int codepoint_to_byte(uint32_t cp) { return cp < tables().byte.size() ? tables().byte[cp] : -1; }

std::string byte_level_decode_token(std::string_view token) {
  std::string out;
  if (!is_valid_utf8(token)) return std::string(token);
  for (size_t i = 0; i < token.size();) {
    size_t len = 0;
    const int b = codepoint_to_byte(utf8_decode(token, i, &len));
    if (b < 0) return std::string(token);
    out.push_back(static_cast<char>(b));
    i += len;
  }
  return out;
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) out.append(byte_to_text(c));
  return out;
}

}  // namespace deepinfer::tokenizer
