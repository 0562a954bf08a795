// Incremental decoding of custom tool arguments `{"input": "…"}` (api spec §8).
#include <gtest/gtest.h>

#include "recipe/stream_events_custom_input.h"

namespace deepinfer::recipe {
namespace {

// Feeds `parts` one by one, then finishes; returns every non-empty piece produced.
std::vector<std::string> decode(std::initializer_list<std::string_view> parts) {
  CustomToolInputDecoder d;
  std::vector<std::string> out;
  for (auto p : parts) {
    std::string piece;
    d.feed(p, piece);
    if (!piece.empty()) out.push_back(piece);
  }
  std::string tail;
  d.finish(tail);
  if (!tail.empty()) out.push_back(tail);
  return out;
}

std::string joined(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (const auto& p : decode(parts)) s += p;
  return s;
}

TEST(EventsCustomInput, DecodesTheInputStringIncrementally) {
  EXPECT_EQ(decode({"{\"input\": \"a", "b\"}"}), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(joined({"{", "\"in", "put\"", " :", "  \"", "x\\\"y\\\\z\\/\\b\\f\\n\\r\\t", "\"}"}),
            "x\"y\\z/\b\f\n\r\t");
}

TEST(EventsCustomInput, WhitespaceBeforePrefixPartsIsAllowed) {
  EXPECT_EQ(joined({" \n{ \"input\"\t:\r\"v\"}"}), "v");
}

TEST(EventsCustomInput, EscapesSplitAcrossDeltasAreHeldBack) {
  EXPECT_EQ(decode({"{\"input\":\"", "\\", "u00", "e9", "!"}),
            (std::vector<std::string>{"é", "!"}));
  EXPECT_EQ(decode({"{\"input\":\"\\ud83d", "\\ude00\""}), (std::vector<std::string>{"😀"}));
}

TEST(EventsCustomInput, LoneOrBrokenSurrogatesBecomeReplacementCharacters) {
  EXPECT_EQ(joined({"{\"input\":\"\\ud83dx\""}), "\xEF\xBF\xBDx");
  EXPECT_EQ(joined({"{\"input\":\"\\ude00\""}), "\xEF\xBF\xBD");
  EXPECT_EQ(joined({"{\"input\":\"\\ud83d\\u0041\""}),
            "\xEF\xBF\xBD"
            "A");
}

TEST(EventsCustomInput, InvalidEscapesPassRaw) {
  EXPECT_EQ(joined({"{\"input\":\"a\\qb\""}), "a\\qb");
  EXPECT_EQ(joined({"{\"input\":\"\\u12G\""}), "\\u12G");
  // A quote inside an unfinished \u escape ends the value; the escape text is kept.
  EXPECT_EQ(joined({"{\"input\":\"\\u12\" tail"}), "\\u12");
}

TEST(EventsCustomInput, TextAfterTheClosingQuoteIsIgnored) {
  EXPECT_EQ(joined({"{\"input\":\"done\", \"other\": 1}"}), "done");
}

TEST(EventsCustomInput, OtherArgumentsPassThroughUnchanged) {
  EXPECT_EQ(joined({"{\"patch\": \"x\"}"}), "{\"patch\": \"x\"}");
  EXPECT_EQ(joined({"plain text"}), "plain text");
  EXPECT_EQ(joined({"  {\"inp", "ut\": 5}"}), "  {\"input\": 5}");
}

TEST(EventsCustomInput, UnfinishedPrefixOrEscapeIsFlushedAtFinish) {
  EXPECT_EQ(decode({"{\"inp"}), (std::vector<std::string>{"{\"inp"}));
  EXPECT_EQ(decode({"{\"input\":\"ab\\u00"}), (std::vector<std::string>{"ab", "\\u00"}));
  CustomToolInputDecoder d;
  std::string out;
  d.finish(out);
  d.feed("more", out);
  EXPECT_EQ(out, "");
}

TEST(EventsCustomInput, JsonStringBodyDecoding) {
  std::string out;
  EXPECT_TRUE(decode_json_string_body("a\\u0041\\n", out));
  EXPECT_EQ(out, "aA\n");
  EXPECT_FALSE(decode_json_string_body("\\x", out));
  EXPECT_FALSE(decode_json_string_body("a\nb", out));
  EXPECT_FALSE(decode_json_string_body("\\u12", out));
}

}  // namespace
}  // namespace deepinfer::recipe
