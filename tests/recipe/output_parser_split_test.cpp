// "Identical for every split" (encoding spec §4, §4.6): the concatenation of each output kind
// does not depend on how the output is cut into chunks — every 2-way split, every byte and every
// character alone, and many random k-way splits (inside UTF-8 characters and markers too).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "common/json.h"
#include "output_parser_test_util.h"
#include "recipe/output_parser.h"

namespace deepinfer::recipe {
namespace {

using testing::bytewise;
using testing::parse;
using testing::Parsed;
using testing::random_split;
using testing::split_at;

// Chunk counts differ between splits, so the completion-token count is left out.
Parsed split_parse(const ParsingOptions& o, const std::vector<std::string>& chunks) {
  Parsed p = parse(o, chunks);
  p.usage = Usage{};
  return p;
}

// The recipe example of §4.6, in the V4.1 (`block` " calls", `prefix` " ") or V4 spelling.
std::string submit_call(std::string_view block, std::string_view prefix) {
  const std::string b(block), p(prefix);
  return "<｜DSML｜" + b + ">\n" +                        //
         "<｜DSML｜" + p + "invoke name=\"submit\">\n" +  //
         "<｜DSML｜" + p + "parameter name=\"shipping address\" string=\"true\">Paris\n日本" +
         "</｜DSML｜" + p + "parameter>\n" +  //
         "<｜DSML｜" + p + "parameter name=\" string= mode \" string=\"false\">{\"enabled\":true}" +
         "</｜DSML｜" + p + "parameter>\n" +  //
         "<｜DSML｜" + p + "parameter name=\"count\" string=\"false\">2</｜DSML｜" + p +
         "parameter>\n" +  //
         "<｜DSML｜" + p + "parameter name=\"\" string=\"true\">empty key</｜DSML｜" + p +
         "parameter>\n" +                  //
         "</｜DSML｜" + p + "invoke>\n" +  //
         "</｜DSML｜" + b + ">";
}

std::vector<std::string> charwise(std::string_view text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    size_t n = 1;
    while (i + n < text.size() && (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80) ++n;
    out.emplace_back(text.substr(i, n));
    i += n;
  }
  return out;
}

void expect_submit(const Parsed& p, const Json& expected, const std::string& where) {
  ASSERT_EQ(p.tool_calls.size(), 1u) << where;
  EXPECT_EQ(p.tool_calls[0].name, "submit") << where;
  auto args = parse_json(p.tool_calls[0].arguments);
  ASSERT_TRUE(args.ok()) << where << ": " << p.tool_calls[0].arguments;
  EXPECT_EQ(args.value(), expected) << where;
  EXPECT_EQ(p.reason, FinishReason::ToolCalls) << where;
}

TEST(OutputParserSplits, Section46ExampleForEverySplit) {
  const Json expected =
      parse_json(R"({"shipping address":"Paris\n日本"," string= mode ":{"enabled":true},)"
                 R"("count":2,"":"empty key"})")
          .value();
  const std::string exact =
      R"({"shipping address": "Paris\n日本", " string= mode ": {"enabled":true}, )"
      R"("count": 2, "": "empty key"})";
  for (const auto& [block, prefix] : {std::pair{"tool_calls", ""}, std::pair{" calls", " "}}) {
    const std::string output = submit_call(block, prefix);
    for (bool think : {false, true}) {
      ParsingOptions o = testing::non_thinking(true);
      if (think) o.reasoning_initial_stage = ReasoningInitialStage::Start;
      const Parsed whole = split_parse(o, {output});
      expect_submit(whole, expected, "whole");
      EXPECT_EQ(whole.tool_calls[0].arguments, exact);
      EXPECT_EQ(whole.content, "");
      EXPECT_EQ(whole.reasoning, "");
      for (size_t cut = 1; cut < output.size(); ++cut) {
        const Parsed p = split_parse(o, split_at(output, {cut}));
        ASSERT_EQ(p, whole) << "cut at byte " << cut;
      }
      expect_submit(parse(o, bytewise(output)), expected, "bytewise");
      EXPECT_EQ(split_parse(o, bytewise(output)), whole);
      EXPECT_EQ(split_parse(o, charwise(output)), whole);
      std::mt19937 rng(46);
      for (int i = 0; i < 300; ++i) {
        const size_t k = 2 + rng() % 60;
        const Parsed p = split_parse(o, random_split(output, k, rng));
        ASSERT_EQ(p, whole) << "random split " << i;
      }
    }
  }
}

// A response exercising every stage: reasoning with LFs and a false marker start, the answer
// with a stop-sequence candidate, a JSON fence, and a tool-call block with UTF-8 values.
const std::string kMixed =
    "\n\nI should check <the> weather.\n\nFirst: 東京 or Paris?\n\n</think>\n\n"
    "Sure. <｜DS no marker. 1 < 2\nLet me look it up.\n```json\n{\"k\": [1, \"日本\"]}\n```\n"
    "after json </think> done。\n\n"
    "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_weather\">\n"
    "<｜DSML｜ parameter name=\"city\" string=\"true\">東京 \"quoted\"\n</｜DSML｜ parameter>\n"
    "<｜DSML｜ parameter name=\"days\" string=\"false\">3</｜DSML｜ parameter>\n"
    "</｜DSML｜ invoke>\n<｜DSML｜ invoke name=\"now\">\n</｜DSML｜ invoke>\n"
    "</｜DSML｜ calls>trailing";

// ToSpace gives one space per pop, so in JSON mode only the non-space content is compared.
Parsed normalized(Parsed p, const ParsingOptions& o) {
  p.usage = Usage{};
  if (o.parse_json_output) std::erase(p.content, ' ');
  return p;
}

TEST(OutputParserSplits, EveryOptionCombinationIsSplitInvariant) {
  std::mt19937 rng(7);
  int combos = 0;
  for (auto stage : {ReasoningInitialStage::None, ReasoningInitialStage::Start,
                     ReasoningInitialStage::Reasoning, ReasoningInitialStage::Content}) {
    for (bool tools : {false, true}) {
      for (bool json : {false, true}) {
        for (bool stops : {false, true}) {
          ParsingOptions o;
          o.reasoning_initial_stage = stage;
          o.parse_tool_calls = tools;
          o.parse_json_output = json;
          if (stops) o.stop_sequences = {"。\n\n", "never matches", "look it"};
          ++combos;
          const Parsed whole = normalized(parse(o, kMixed), o);
          EXPECT_TRUE(whole.finished);
          for (size_t cut = 1; cut < kMixed.size(); ++cut) {
            ASSERT_EQ(normalized(parse(o, split_at(kMixed, {cut})), o), whole)
                << "combo " << combos << " cut " << cut;
          }
          ASSERT_EQ(normalized(parse(o, bytewise(kMixed)), o), whole) << "combo " << combos;
          for (int i = 0; i < 40; ++i) {
            ASSERT_EQ(normalized(parse(o, random_split(kMixed, 2 + rng() % 80, rng)), o), whole)
                << "combo " << combos << " random " << i;
          }
        }
      }
    }
  }
}

TEST(OutputParserSplits, MixedDocumentExpectedParse) {
  ParsingOptions o;
  o.reasoning_initial_stage = ReasoningInitialStage::Start;
  const Parsed p = parse(o, kMixed);
  EXPECT_EQ(p.reasoning, "I should check <the> weather.\n\nFirst: 東京 or Paris?");
  EXPECT_EQ(p.content,
            "Sure. <｜DS no marker. 1 < 2\nLet me look it up.\n```json\n{\"k\": [1, \"日本\"]}\n"
            "```\nafter json  done。");
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0].name, "get_weather");
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"city": "東京 \"quoted\"\n", "days": 3})");
  EXPECT_EQ(p.tool_calls[1].name, "now");
  EXPECT_EQ(p.tool_calls[1].arguments, "{}");
  EXPECT_EQ(p.reason, FinishReason::ToolCalls);

  o.parse_json_output = true;
  const Parsed j = parse(o, kMixed);
  EXPECT_EQ(j.reasoning, "I should check <the> weather.\n\nFirst: 東京 or Paris?");
  EXPECT_EQ(j.content, " {\"k\": [1, \"日本\"]} ");
  EXPECT_EQ(j.tool_calls.size(), 2u);

  o.parse_json_output = false;
  o.stop_sequences = {"look it"};
  const Parsed s = parse(o, kMixed);
  EXPECT_EQ(s.content, "Sure. <｜DS no marker. 1 < 2\nLet me ");
  EXPECT_EQ(s.stop_sequence, "look it");
  EXPECT_TRUE(s.tool_calls.empty());
}

}  // namespace
}  // namespace deepinfer::recipe
