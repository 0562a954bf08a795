// The byte-level alphabet of GPT-2 style BPE (HF `ByteLevel`): each byte 0..255 maps to one
// printable code point, so every byte string has a text form. Tables are built once.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::tokenizer {

// Code point that stands for byte b.
uint32_t byte_to_codepoint(uint8_t b);

// UTF-8 text form of byte b (1 or 2 bytes).
std::string_view byte_to_text(uint8_t b);

// Byte for code point cp, or -1 if cp is not in the byte-level alphabet.
int codepoint_to_byte(uint32_t cp);

// Converts a token's text form to bytes the way HF's ByteLevel decoder does: if every code
// point is in the alphabet, the mapped bytes; otherwise the token's own UTF-8 bytes.
std::string byte_level_decode_token(std::string_view token);

// Converts raw bytes to their byte-level text form.
std::string byte_level_encode(std::string_view bytes);

}  // namespace deepinfer::tokenizer
