#include "recipe/stream_events_custom_input.h"

#include <array>
#include <cstdint>

#include "common/utf8.h"

namespace deepinfer::recipe {
namespace {

constexpr std::array<std::string_view, 4> kPrefixParts = {"{", "\"input\"", ":", "\""};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// `\u` followed by 0–4 hex digits (or a prefix of `\u`).
bool partial_unicode_escape(std::string_view raw) {
  if (raw.size() > 6) return false;
  if (std::string_view("\\u").starts_with(raw)) return true;
  if (!raw.starts_with("\\u")) return false;
  for (char c : raw.substr(2))
    if (hex_value(c) < 0) return false;
  return true;
}

int parse_hex4(std::string_view s) {
  int v = 0;
  for (char c : s.substr(0, 4)) v = v * 16 + hex_value(c);
  return v;
}

// Whether a pending escape may still be completed by later input.
bool incomplete_escape(std::string_view raw) {
  if (raw.size() < 6) return partial_unicode_escape(raw);
  if (!partial_unicode_escape(raw.substr(0, 6))) return false;
  const int first = parse_hex4(raw.substr(2));
  const bool high = first >= 0xD800 && first <= 0xDBFF;
  return high && raw.size() < 12 && partial_unicode_escape(raw.substr(6));
}

bool read_hex4(std::string_view body, size_t at, int& value) {
  if (at + 4 > body.size()) return false;
  for (size_t k = 0; k < 4; ++k)
    if (hex_value(body[at + k]) < 0) return false;
  value = parse_hex4(body.substr(at));
  return true;
}

}  // namespace

bool decode_json_string_body(std::string_view body, std::string& out) {
  std::string decoded;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (static_cast<unsigned char>(c) < 0x20 || c == '"') return false;
    if (c != '\\') {
      decoded.push_back(c);
      continue;
    }
    if (++i >= body.size()) return false;
    switch (body[i]) {
      case '"':
        decoded.push_back('"');
        break;
      case '\\':
        decoded.push_back('\\');
        break;
      case '/':
        decoded.push_back('/');
        break;
      case 'b':
        decoded.push_back('\b');
        break;
      case 'f':
        decoded.push_back('\f');
        break;
      case 'n':
        decoded.push_back('\n');
        break;
      case 'r':
        decoded.push_back('\r');
        break;
      case 't':
        decoded.push_back('\t');
        break;
      case 'u': {
        int unit = 0;
        if (!read_hex4(body, i + 1, unit)) return false;
        i += 4;
        if (unit >= 0xD800 && unit <= 0xDBFF) {
          int low = 0;
          if (i + 2 < body.size() && body[i + 1] == '\\' && body[i + 2] == 'u' &&
              read_hex4(body, i + 3, low) && low >= 0xDC00 && low <= 0xDFFF) {
            i += 6;
            append_utf8(decoded, 0x10000 + ((static_cast<uint32_t>(unit) - 0xD800) << 10) +
                                     (static_cast<uint32_t>(low) - 0xDC00));
          } else {
            append_utf8(decoded, 0xFFFD);
          }
        } else if (unit >= 0xDC00 && unit <= 0xDFFF) {
          append_utf8(decoded, 0xFFFD);
        } else {
          append_utf8(decoded, static_cast<uint32_t>(unit));
        }
        break;
      }
      default:
        return false;
    }
  }
  out += decoded;
  return true;
}

void CustomToolInputDecoder::feed(std::string_view chunk, std::string& out) {
  for (char c : chunk) {
    switch (state_) {
      case State::Prefix:
        feed_prefix(c, out);
        break;
      case State::Value:
        feed_value(c, out);
        break;
      case State::Passthrough:
        out.push_back(c);
        break;
      case State::Done:
        return;
    }
  }
}

void CustomToolInputDecoder::finish(std::string& out) {
  state_ = State::Done;
  out += pending_;
  pending_.clear();
}

void CustomToolInputDecoder::feed_prefix(char c, std::string& out) {
  pending_.push_back(c);
  const std::string_view part = kPrefixParts[static_cast<size_t>(part_)];
  if (c == part[offset_]) {
    if (++offset_ == part.size()) {
      ++part_;
      offset_ = 0;
      if (part_ == static_cast<int>(kPrefixParts.size())) {
        pending_.clear();
        state_ = State::Value;
      }
    }
  } else if (offset_ != 0 || !is_space(c)) {
    out += pending_;
    pending_.clear();
    state_ = State::Passthrough;
  }
}

void CustomToolInputDecoder::feed_value(char c, std::string& out) {
  if (pending_.empty()) {
    if (c == '\\') {
      pending_.push_back(c);
    } else if (c == '"') {
      state_ = State::Done;
    } else {
      out.push_back(c);
    }
    return;
  }
  if (c == '"' && pending_.back() != '\\') {
    out += pending_;
    pending_.clear();
    state_ = State::Done;
    return;
  }
  pending_.push_back(c);
  if (incomplete_escape(pending_)) return;
  if (!decode_json_string_body(pending_, out)) out += pending_;
  pending_.clear();
}

}  // namespace deepinfer::recipe
