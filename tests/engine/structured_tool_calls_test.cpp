// The DSML tool-call grammar against the encoding spec's block format (§3.8): the spec's
// example block is accepted byte for byte (with the DSML marker as its token), wrong names,
// missing required parameters, wrong value types and text after the block are rejected; V4
// spelling, tool_choice required (block opened by the prompt), thinking, response_format
// content and non-strict tools.
#include "engine/structured_tool_calls.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/json.h"
#include "engine/structured_mask.h"

namespace deepinfer::engine::structured {
namespace {

// Byte tokens 0..255 (F8 / F9 stand for the DSML marker and </think>); id 256 is the end.
constexpr int32_t kEnd = 256;

std::shared_ptr<const TokenTable> vocab() {
  static auto t = [] {
    std::vector<std::string> tokens(257);
    for (int i = 0; i < 256; ++i) tokens[i] = std::string(1, static_cast<char>(i));
    return TokenTable::from_bytes(tokens);
  }();
  return t;
}

// Text with the marker spelled as in the spec → the grammar's bytes.
std::string bytes_of(std::string text) {
  const std::string dsml = std::string(kDsmlSpelling);
  for (size_t p; (p = text.find(dsml)) != std::string::npos;)
    text.replace(p, dsml.size(), std::string(1, static_cast<char>(kDsmlByte)));
  for (size_t p; (p = text.find("</think>")) != std::string::npos;)
    text.replace(p, 8, std::string(1, static_cast<char>(kThinkEndByte)));
  return text;
}

const char* kWeather = R"({"name":"get_weather","strict":true,"parameters":{"type":"object",
  "properties":{"location":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":14},
  "opts":{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}},
  "b":{"type":"boolean"}},"required":["a"],"additionalProperties":false}},
  "required":["location","days"],"additionalProperties":false}})";
const char* kNow = R"({"name":"now","strict":true,"parameters":{"type":"object","properties":{}}})";

std::shared_ptr<const CompiledGrammar> compile(const std::string& spec_json) {
  auto spec = parse_json(spec_json);
  EXPECT_TRUE(spec.ok()) << spec_json;
  auto g = tool_call_grammar(spec.value());
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  if (!g.ok()) return nullptr;
  auto c = CompiledGrammar::compile(std::move(g.value()), vocab());
  EXPECT_TRUE(c.ok());
  return c.ok() ? c.value() : nullptr;
}

std::string spec(const std::string& extra,
                 const std::string& tools = std::string("[") + kWeather + "," + kNow + "]") {
  return R"({"encoding":"v41","tools":)" + tools + (extra.empty() ? "" : "," + extra) + "}";
}

// Whole output accepted (and complete, so that the end token is allowed).
bool complete(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  GrammarMatcher m(g, {kEnd});
  return m.accept_bytes(bytes_of(text)) && m.can_finish();
}

const std::string kSpecBlock =
    "<｜DSML｜ calls>\n"
    "<｜DSML｜ invoke name=\"get_weather\">\n"
    "<｜DSML｜ parameter name=\"location\" string=\"true\">a<b & c</｜DSML｜ parameter>\n"
    "<｜DSML｜ parameter name=\"days\" string=\"false\">3</｜DSML｜ parameter>\n"
    "<｜DSML｜ parameter name=\"opts\" string=\"false\">{\"a\":[1,2],\"b\":true}</｜DSML｜ "
    "parameter>\n"
    "</｜DSML｜ invoke>\n"
    "</｜DSML｜ calls>";

TEST(StructuredToolCalls, TheSpecBlockIsAcceptedAfterTextOrAlone) {
  auto g = compile(spec(""));
  ASSERT_TRUE(g);
  EXPECT_TRUE(complete(g, kSpecBlock));
  EXPECT_TRUE(complete(g, "Let me check.\n\n" + kSpecBlock));
  EXPECT_TRUE(complete(g, "Only text, no call."));
  EXPECT_TRUE(complete(g, ""));
  // Several invokes; a call with no arguments (spec: "\n\n" between the tags).
  EXPECT_TRUE(complete(g,
                       "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"now\">\n\n</｜DSML｜ invoke>\n"
                       "<｜DSML｜ invoke name=\"now\">\n\n</｜DSML｜ invoke>\n</｜DSML｜ calls>"));
}

TEST(StructuredToolCalls, WrongNamesTypesAndMissingParametersAreRejected) {
  auto g = compile(spec(""));
  ASSERT_TRUE(g);
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = kSpecBlock;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  EXPECT_FALSE(complete(g, replaced("get_weather", "get_wind")));
  EXPECT_FALSE(complete(g, replaced("string=\"false\">3", "string=\"true\">3")));
  EXPECT_FALSE(complete(g, replaced(">3<", ">15<")));  // maximum 14
  EXPECT_FALSE(complete(g, replaced("string=\"true\">a<b", "string=\"false\">a<b")));
  EXPECT_FALSE(complete(g, replaced("\"b\":true", "\"b\":1")));
  // days is required.
  EXPECT_FALSE(complete(
      g,
      replaced("<｜DSML｜ parameter name=\"days\" string=\"false\">3</｜DSML｜ parameter>\n", "")));
  // Optional opts may be left out; order follows the schema.
  EXPECT_TRUE(complete(
      g, replaced("\n<｜DSML｜ parameter name=\"opts\" string=\"false\">{\"a\":[1,2],\"b\":true}"
                  "</｜DSML｜ parameter>",
                  "")));
  // Nothing after the block; the block must end.
  EXPECT_FALSE(complete(g, kSpecBlock + "\nmore"));
  EXPECT_FALSE(complete(g, kSpecBlock.substr(0, kSpecBlock.size() - 3)));
  // The marker spelled as plain text never appears in free text.
  GrammarMatcher m(g, {kEnd});
  EXPECT_FALSE(m.accept_bytes("text \xef\xbd\x9c"));
}

TEST(StructuredToolCalls, V4SpellingRequiredThinkingAndContent) {
  std::string v4 = spec("");
  v4.replace(v4.find("v41"), 3, "v4");
  auto g4 = compile(v4);
  ASSERT_TRUE(g4);
  EXPECT_TRUE(complete(g4,
                       "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"now\">\n\n</｜DSML｜invoke>\n"
                       "</｜DSML｜tool_calls>"));
  EXPECT_FALSE(complete(g4, kSpecBlock));

  // Required: the prompt opened the block; only invokes and the block end follow.
  auto req = compile(spec(R"("required":true)"));
  ASSERT_TRUE(req);
  EXPECT_TRUE(complete(req, kSpecBlock.substr(std::string("<｜DSML｜ calls>\n").size())));
  EXPECT_FALSE(complete(req, kSpecBlock));
  EXPECT_FALSE(complete(req, "text"));
  EXPECT_FALSE(complete(req, "</｜DSML｜ calls>"));  // at least one invoke

  // Thinking: free reasoning, </think>, then the answer.
  auto think = compile(spec(R"("thinking":true)"));
  ASSERT_TRUE(think);
  EXPECT_TRUE(complete(think, "Reasoning here.</think>Answer."));
  EXPECT_TRUE(complete(think, "Hmm.</think>" + kSpecBlock));
  EXPECT_FALSE(complete(think, kSpecBlock));  // no call inside the reasoning

  // response_format next to tools: the content is JSON, a block, or both.
  auto content = compile(spec(
      R"("content":{"kind":"json_schema","source":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"],"additionalProperties":false}})"));
  ASSERT_TRUE(content);
  EXPECT_TRUE(complete(content, R"({"x":5})"));
  EXPECT_TRUE(complete(content, "{\"x\":5}\n\n" + kSpecBlock));
  EXPECT_TRUE(complete(content, kSpecBlock));
  EXPECT_FALSE(complete(content, "free text"));
}

TEST(StructuredToolCalls, StringParametersAreRawWithTheirConstraints) {
  const std::string tool =
      R"([{"name":"t","strict":true,"parameters":{"type":"object","properties":{
      "code":{"type":"string","pattern":"[A-Z]{3}"},"kind":{"enum":["a b","c\"d"]},
      "id":{"type":"string","format":"uuid"},"n":{"type":["string","null"]}},
      "required":["code","kind"]}}])";
  auto g = compile(spec("", tool));
  ASSERT_TRUE(g);
  auto call = [](const std::string& params) {
    return "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"t\">\n" + params +
           "\n</｜DSML｜ invoke>\n</｜DSML｜ calls>";
  };
  auto p = [](const std::string& name, bool str, const std::string& v) {
    return "<｜DSML｜ parameter name=\"" + name + "\" string=\"" + (str ? "true" : "false") +
           "\">" + v + "</｜DSML｜ parameter>";
  };
  EXPECT_TRUE(complete(g, call(p("code", true, "ABC") + "\n" + p("kind", true, "c\"d"))));
  EXPECT_TRUE(complete(g, call(p("code", true, "ABC") + "\n" + p("kind", true, "a b") + "\n" +
                               p("id", true, "3f2b8c1e-9a4d-4e7b-8c2a-1d5e6f7a8b9c") + "\n" +
                               p("n", false, "null"))));
  // A string-or-null parameter carries a string as JSON (string="false").
  EXPECT_TRUE(complete(g, call(p("code", true, "ABC") + "\n" + p("kind", true, "a b") + "\n" +
                               p("n", false, "\"x\""))));
  EXPECT_FALSE(complete(g, call(p("code", true, "AB1") + "\n" + p("kind", true, "a b"))));
  EXPECT_FALSE(complete(g, call(p("code", true, "\"ABC\"") + "\n" + p("kind", true, "a b"))));
  EXPECT_FALSE(complete(g, call(p("code", true, "ABC") + "\n" + p("kind", true, "c\\\"d"))));
}

TEST(StructuredToolCalls, NonStrictToolsTakeAnyParametersAndBadSchemasAreErrors) {
  const std::string tools =
      R"([{"name":"loose","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}},)" +
      std::string(kNow) + "]";
  auto g = compile(spec("", tools));
  ASSERT_TRUE(g);
  EXPECT_TRUE(complete(g,
                       "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"loose\">\n"
                       "<｜DSML｜ parameter name=\"zz\" string=\"true\">any</｜DSML｜ parameter>\n"
                       "<｜DSML｜ parameter name=\"a\" string=\"false\">[1]</｜DSML｜ parameter>\n"
                       "</｜DSML｜ invoke>\n</｜DSML｜ calls>"));
  // With tool_choice forcing the block, the loose tool's schema applies too.
  auto req = compile(spec(R"("required":true)", tools));
  ASSERT_TRUE(req);
  EXPECT_FALSE(complete(req,
                        "<｜DSML｜ invoke name=\"loose\">\n"
                        "<｜DSML｜ parameter name=\"zz\" string=\"true\">any</｜DSML｜ parameter>\n"
                        "</｜DSML｜ invoke>\n</｜DSML｜ calls>"));
  EXPECT_TRUE(complete(req,
                       "<｜DSML｜ invoke name=\"loose\">\n"
                       "<｜DSML｜ parameter name=\"a\" string=\"false\">-4</｜DSML｜ parameter>\n"
                       "</｜DSML｜ invoke>\n</｜DSML｜ calls>"));

  auto bad = parse_json(spec(
      "",
      R"([{"name":"t","strict":true,"parameters":{"type":"object","properties":{"a":{"type":"string","contentEncoding":"base64"}}}}])"));
  auto e = tool_call_grammar(bad.value());
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("contentEncoding"), std::string::npos) << e.error().message;
  auto bad2 = parse_json(
      spec("", R"([{"name":"t","strict":true,"parameters":{"type":"object","minProperties":1}}])"));
  auto e2 = tool_call_grammar(bad2.value());
  ASSERT_FALSE(e2.ok());
  EXPECT_NE(e2.error().message.find("minProperties"), std::string::npos) << e2.error().message;
}

}  // namespace
}  // namespace deepinfer::engine::structured
