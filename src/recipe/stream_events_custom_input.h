// Incremental decoding of a Responses custom tool call's arguments `{"input": "…"}` into the
// bare input string (api spec §8): the leading `{`, `"input"`, `:`, `"` (whitespace allowed
// before each part) are consumed, the JSON string value is decoded as it arrives (escapes split
// across deltas are held back), and everything after the closing quote is ignored. Arguments
// that do not start with that prefix pass through unchanged.
#pragma once

#include <string>
#include <string_view>

namespace deepinfer::recipe {

class CustomToolInputDecoder {
 public:
  // Appends the decoded text available after `chunk` to `out`.
  void feed(std::string_view chunk, std::string& out);
  // Ends the input: an unfinished prefix or escape is appended to `out` unchanged.
  void finish(std::string& out);
  void reset() { *this = CustomToolInputDecoder{}; }

 private:
  enum class State { Prefix, Value, Passthrough, Done };
  void feed_prefix(char c, std::string& out);
  void feed_value(char c, std::string& out);

  State state_ = State::Prefix;
  std::string pending_;  // prefix text consumed so far, or the escape being read
  int part_ = 0;
  size_t offset_ = 0;
};

// Decodes a JSON string body (no quotes) into UTF-8; lone surrogates become U+FFFD. False if it
// is not a valid JSON string body (bad escape, raw control character).
bool decode_json_string_body(std::string_view body, std::string& out);

}  // namespace deepinfer::recipe
