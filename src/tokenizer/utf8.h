// UTF-8 helpers for the tokenizer: validation, code-point decoding, and the lossy conversion
// HF `tokenizers` applies when decoding (each maximal invalid subpart becomes one U+FFFD).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::tokenizer {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if the bytes there are not a
// complete valid sequence (truncated or invalid).
size_t utf8_sequence_length(std::string_view s, size_t i);

// True if the whole string is valid UTF-8 (no surrogates, no overlongs, <= U+10FFFF).
bool is_valid_utf8(std::string_view s);

// Offset of the first invalid byte, or s.size() if valid.
size_t utf8_error_offset(std::string_view s);

// Decodes the code point at s[i] (s must be valid there); sets *len to its byte length.
uint32_t utf8_decode(std::string_view s, size_t i, size_t* len);

// Length of the maximal invalid subpart at s[i] (s[i] starts no valid sequence): the longest
// prefix of a valid sequence present, at least 1 byte (Unicode §3.9 / WHATWG decoding).
size_t utf8_invalid_subpart_length(std::string_view s, size_t i);

// True if the bytes s[i..] are a proper prefix of some valid sequence (more input may
// complete them).
bool utf8_is_incomplete_prefix(std::string_view s, size_t i);

// Appends s to out, replacing every maximal invalid subpart with U+FFFD.
void append_utf8_lossy(std::string_view s, std::string& out);

}  // namespace deepinfer::tokenizer
