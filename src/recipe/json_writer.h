// Hand-written JSON output for the stream events (api spec §7–§9): appends literal fragments,
// escaped strings and integers to a caller-owned buffer, so an event is one pass with no DOM and,
// once the buffer has grown, no allocation. Also the compact serialization of a Json value in the
// reference's number format (shortest round-trip floats: `1.0`, `1e16`, `1.5e-7`).
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/json.h"
#include "recipe/python_json.h"

namespace deepinfer::recipe {

class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}

  // Literal JSON text (keys, punctuation, pre-rendered fragments).
  JsonWriter& raw(std::string_view text) {
    out_.append(text);
    return *this;
  }
  // A quoted, escaped JSON string.
  JsonWriter& str(std::string_view text) {
    out_.push_back('"');
    append_json_escaped(out_, text);
    out_.push_back('"');
    return *this;
  }
  JsonWriter& str_or_null(const std::optional<std::string>* text) {
    if (text == nullptr || !text->has_value()) return raw("null");
    return str(**text);
  }
  JsonWriter& num(int64_t value) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, value);
    out_.append(buf, r.ptr);
    return *this;
  }
  std::string& buffer() { return out_; }

 private:
  std::string& out_;
};

// Compact JSON of `value` (",", ":", keys in stored order, non-ASCII raw, floats as above).
void append_json_value(std::string& out, const Json& value);
std::string json_value_text(const Json& value);

// Shortest round-trip float: fixed notation for decimal exponents in [-5, 16), otherwise
// `d[.ddd]e[-]X`; integral values keep `.0`. Non-finite values print as null.
void append_json_float(std::string& out, double value);

}  // namespace deepinfer::recipe
