// Structured output through the HTTP API (request path without sockets): Chat response_format,
// Responses text.format, guided_* extensions and strict tool calls, stream and non-stream,
// with a scripted model whose script the constraint overrides (a worst case: the model "wants"
// plain text). Returned content and tool arguments are validated with ajv (node).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/json.h"
#include "service_harness.h"

namespace deepinfer::server::testing {
namespace {

constexpr const char* kChat = "/v1/chat/completions";
constexpr const char* kResponses = "/v1/responses";

const char* kSchema =
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},)"
    R"("age":{"type":"integer","minimum":0,"maximum":120},)"
    R"("tags":{"type":"array","items":{"enum":["a","b",1]},"maxItems":2},)"
    R"("ok":{"type":"boolean"}},"required":["name","age"],"additionalProperties":false})";

// The test pattern [a-c]{2,4}-[0-9]{3}, checked by hand: <regex> trips GCC 12's
// -Wmaybe-uninitialized under ASan, and an independent check is the point anyway.
bool matches_test_pattern(const std::string& s) {
  const size_t dash = s.find('-');
  if (dash == std::string::npos || dash < 2 || dash > 4 || s.size() != dash + 4) return false;
  for (size_t i = 0; i < dash; ++i)
    if (s[i] < 'a' || s[i] > 'c') return false;
  for (size_t i = dash + 1; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

const char* kWeatherTool =
    R"({"type":"function","function":{"name":"get_weather","strict":true,"parameters":)"
    R"({"type":"object","properties":{"location":{"type":"string","maxLength":10},)"
    R"("days":{"type":"integer","minimum":1,"maximum":14},)"
    R"("unit":{"enum":["c","f"]},"detail":{"type":"object","properties":)"
    R"({"hourly":{"type":"boolean"}},"required":["hourly"],"additionalProperties":false}},)"
    R"("required":["location","days"],"additionalProperties":false}}})";
const char* kWeatherParams =
    R"({"type":"object","properties":{"location":{"type":"string","maxLength":10},)"
    R"("days":{"type":"integer","minimum":1,"maximum":14},)"
    R"("unit":{"enum":["c","f"]},"detail":{"type":"object","properties":)"
    R"({"hourly":{"type":"boolean"}},"required":["hourly"],"additionalProperties":false}},)"
    R"("required":["location","days"],"additionalProperties":false})";
const char* kTimeTool =
    R"({"type":"function","function":{"name":"get_time","strict":true,"parameters":)"
    R"({"type":"object","properties":{"zone":{"type":"string","pattern":"[A-Z]{3}"}},)"
    R"("required":["zone"],"additionalProperties":false}}})";
const char* kTimeParams =
    R"({"type":"object","properties":{"zone":{"type":"string","pattern":"[A-Z]{3}"}},)"
    R"("required":["zone"],"additionalProperties":false})";

Json parse(const std::string& s) {
  auto v = parse_json(s);
  EXPECT_TRUE(v.ok()) << s;
  return v.ok() ? v.value() : Json();
}

// Chat body: thinking off unless `thinking`; `extra` is spliced in as more members.
std::string chat(const std::string& extra, uint64_t seed, bool stream = false,
                 bool thinking = false) {
  return std::string(R"({"model":"deepseek-v4-test","max_tokens":900,"temperature":1,"seed":)") +
         std::to_string(seed) + (stream ? R"(,"stream":true)" : "") +
         (thinking ? "" : R"(,"reasoning_effort":"none")") +
         R"(,"messages":[{"role":"user","content":"Answer in json."}],)" + extra + "}";
}

struct ChatResult {
  std::string reasoning, content, finish;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

ChatResult chat_result(const Reply& r, bool stream) {
  ChatResult out;
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return out;
  if (!stream) {
    const Json v = parse(r.body);
    const auto& c = v.at("choices").at(0).as_object();
    const auto& m = c.at("message").as_object();
    if (auto* x = m.if_contains("content"); x && x->is_string()) out.content = x->as_string();
    if (auto* x = m.if_contains("reasoning_content"); x && x->is_string())
      out.reasoning = x->as_string();
    if (auto* tc = m.if_contains("tool_calls"); tc && tc->is_array())
      for (const Json& call : tc->as_array())
        out.calls.emplace_back(std::string(call.at("function").at("name").as_string()),
                               std::string(call.at("function").at("arguments").as_string()));
    out.finish = c.at("finish_reason").as_string();
    return out;
  }
  size_t pos = 0;
  while ((pos = r.body.find("data: ", pos)) != std::string::npos) {
    const size_t end = r.body.find("\n\n", pos);
    const std::string data = r.body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") continue;
    const Json chunk = parse(data);
    if (chunk.at("choices").as_array().empty()) continue;
    const auto& c = chunk.at("choices").at(0).as_object();
    const auto& d = c.at("delta").as_object();
    if (auto* x = d.if_contains("content"); x && x->is_string()) out.content += x->as_string();
    if (auto* x = d.if_contains("reasoning_content"); x && x->is_string())
      out.reasoning += x->as_string();
    if (auto* tc = d.if_contains("tool_calls"); tc && tc->is_array())
      for (const Json& call : tc->as_array()) {
        const auto& f = call.at("function").as_object();
        if (auto* n = f.if_contains("name"); n && n->is_string())
          out.calls.emplace_back(std::string(n->as_string()), "");
        if (auto* a = f.if_contains("arguments"); a && a->is_string() && !out.calls.empty())
          out.calls.back().second += a->as_string();
      }
    if (c.at("finish_reason").is_string()) out.finish = c.at("finish_reason").as_string();
  }
  return out;
}

class Validator {
 public:
  void add(const std::string& schema, const std::string& output) {
    lines_ += to_json(JsonObject{{"schema", parse(schema)}, {"output", Json(output)}}) + "\n";
    ++count_;
  }
  int count() const { return count_; }
  void expect_valid(const std::string& name) const {
    const std::string path = std::string(DEEPINFER_BINARY_DIR) + "/" + name + ".jsonl";
    std::ofstream(path) << lines_;
    const std::string cmd = "node " + std::string(DEEPINFER_SOURCE_DIR) +
                            "/tests/js/structured_validate.mjs " + path + " > /dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "ajv rejected outputs in " << path;
  }

 private:
  std::string lines_;
  int count_ = 0;
};

HarnessOptions options(const std::string& script) {
  HarnessOptions o;
  o.script = script;
  o.max_model_len = 2048;  // the tool prompt alone is ~700 ids of the 640-id tokenizer
  return o;
}

TEST(StructuredApi, ChatJsonSchemaCompleteAndStreamValidate) {
  ServiceHarness h(options("Hello there, no JSON here."));
  ASSERT_TRUE(h.ok()) << h.error();
  Validator v;
  const std::string rf =
      std::string(
          R"("response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,"schema":)") +
      kSchema + "}}";
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const bool stream = seed % 2 == 0;
    const ChatResult r = chat_result(h.post(kChat, chat(rf, seed, stream)), stream);
    EXPECT_EQ(r.finish, "stop") << r.content;
    v.add(kSchema, r.content);
  }
  v.expect_valid("structured_api_chat");
}

TEST(StructuredApi, ValidScriptedOutputPassesUnchanged) {
  const std::string doc = R"({"name":"Ada","age":36,"ok":true})";
  ServiceHarness h(options(doc));
  ASSERT_TRUE(h.ok()) << h.error();
  const std::string rf =
      std::string(
          R"("response_format":{"type":"json_schema","json_schema":{"name":"p","schema":)") +
      kSchema + "}}";
  EXPECT_EQ(chat_result(h.post(kChat, chat(rf, 3)), false).content, doc);
}

TEST(StructuredApi, ResponsesTextFormatCompleteAndStreamValidate) {
  ServiceHarness h(options("Plain words."));
  ASSERT_TRUE(h.ok()) << h.error();
  Validator v;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const bool stream = seed % 2 == 0;
    const std::string body =
        std::string(
            R"({"model":"deepseek-v4-test","max_output_tokens":300,"temperature":1,"seed":)") +
        std::to_string(seed) + (stream ? R"(,"stream":true)" : "") +
        R"(,"reasoning":{"effort":"none"},"input":"Answer in json.","text":{"format":{"type":"json_schema","name":"p","strict":true,"schema":)" +
        kSchema + "}}}";
    const Reply r = h.post(kResponses, body);
    ASSERT_EQ(r.status, 200) << r.body;
    std::string text;
    if (!stream) {
      const Json response = parse(r.body);
      ASSERT_TRUE(response.is_object() && response.as_object().contains("output")) << r.body;
      for (const Json& item : response.at("output").as_array())
        if (item.at("type").as_string() == "message")
          for (const Json& part : item.at("content").as_array())
            text += part.at("text").as_string();
    } else {
      size_t pos = 0;
      while ((pos = r.body.find("data: ", pos)) != std::string::npos) {
        pos += 6;
        const size_t end = r.body.find("\n\n", pos);
        const Json event = parse(r.body.substr(pos, end - pos));
        ASSERT_TRUE(event.is_object()) << r.body;
        if (event.at("type").as_string() == "response.output_text.delta")
          text += event.at("delta").as_string();
      }
    }
    v.add(kSchema, text);
  }
  v.expect_valid("structured_api_responses");
}

TEST(StructuredApi, GuidedRegexChoiceAndJsonObject) {
  ServiceHarness h(options("Nothing like the pattern."));
  ASSERT_TRUE(h.ok()) << h.error();
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const ChatResult a =
        chat_result(h.post(kChat, chat(R"("guided_regex":"[a-c]{2,4}-[0-9]{3}")", seed)), false);
    EXPECT_TRUE(matches_test_pattern(a.content)) << a.content;
    const ChatResult b = chat_result(
        h.post(kChat, chat(R"("structured_outputs":{"choice":["yes","no","maybe"]})", seed, true)),
        true);
    EXPECT_TRUE(b.content == "yes" || b.content == "no" || b.content == "maybe") << b.content;
  }
  Validator v;
  const std::string obj = R"({"type":"object"})";
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    // Any object: the random model may nest deeply, so only a finished one is checked.
    const ChatResult c = chat_result(
        h.post(kChat, chat(R"("response_format":{"type":"json_object"})", seed)), false);
    if (c.finish == "stop") v.add(obj, c.content);
  }
  if (v.count() > 0) v.expect_valid("structured_api_json_object");
}

TEST(StructuredApi, ThinkingStaysFreeAndTheAnswerAfterThinkEndIsConstrained) {
  ServiceHarness h(options("Thinking it over.</think>Hello there."));
  ASSERT_TRUE(h.ok()) << h.error();
  Validator v;
  const std::string rf = std::string(R"("guided_json":)") + kSchema;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const bool stream = seed % 2 == 0;
    const ChatResult r = chat_result(h.post(kChat, chat(rf, seed, stream, true)), stream);
    EXPECT_EQ(r.reasoning, "Thinking it over.");
    v.add(kSchema, r.content);
  }
  v.expect_valid("structured_api_thinking");
}

void expect_400(const Reply& r, const std::string& mention) {
  EXPECT_EQ(r.status, 400) << r.body;
  const Json v = parse(r.body);
  ASSERT_TRUE(v.is_object()) << r.body;
  const auto& e = v.at("error").as_object();
  EXPECT_EQ(e.at("type").as_string(), "invalid_request_error") << r.body;
  EXPECT_NE(std::string(e.at("message").as_string()).find(mention), std::string::npos) << r.body;
}

TEST(StructuredApi, BadConstraintsAre400sNamingTheProblem) {
  ServiceHarness h(options("x"));
  ASSERT_TRUE(h.ok()) << h.error();
  expect_400(
      h.post(
          kChat,
          chat(
              R"("response_format":{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"object","patternProperties":{}}}})",
              1)),
      "patternProperties");
  expect_400(h.post(kChat, chat(R"("guided_regex":"a(b","guided_choice":["a"])", 1)),
             "only one structured output constraint");
  expect_400(h.post(kChat, chat(R"("guided_regex":"(a")", 1)), "guided_regex");
  expect_400(h.post(kChat, chat(R"("guided_regex":"(?=a)b")", 1, true)), "guided_regex");
  expect_400(h.post(kChat, chat(R"("guided_json":{"type":"string","format":"hostname"})", 1)),
             "hostname");
  expect_400(h.post(kChat, chat(R"("guided_grammar":"root ::= undefined_rule")", 1)),
             "guided_grammar");
  const std::string bad_tool =
      R"("tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"type":"object","properties":{"a":{"type":"string","contentEncoding":"base64"}}}}}])";
  expect_400(h.post(kChat, chat(bad_tool, 1)), "contentEncoding");
}

// Strict tool calls: every sampled output parses into calls of declared tools whose
// arguments validate against the tool's schema.
TEST(StructuredApi, StrictToolCallsParseIntoSchemaValidArguments) {
  ServiceHarness h(options("Hello there."));
  ASSERT_TRUE(h.ok()) << h.error();
  Validator v;
  const std::string tools = std::string(R"("tools":[)") + kWeatherTool + "," + kTimeTool + "]";
  int calls = 0, finished = 0;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    const bool stream = seed % 2 == 0;
    std::string choice = R"("tool_choice":"required",)";
    if (seed % 4 == 1)
      choice = R"("tool_choice":{"type":"function","function":{"name":"get_time"}},)";
    // Half the requests allow one call only; the others may chain calls (a know-nothing model
    // sometimes chains past max_tokens: only finished outputs are checked).
    const bool single = seed % 4 >= 2;
    if (single) choice += R"("parallel_tool_calls":false,)";
    const std::string body = chat(choice + tools, seed, stream);
    const ChatResult r = chat_result(h.post(kChat, body), stream);
    if (r.finish == "length") continue;
    ++finished;
    EXPECT_EQ(r.finish, "tool_calls") << r.content;
    ASSERT_FALSE(r.calls.empty()) << r.content;
    if (single) {
      EXPECT_EQ(r.calls.size(), 1u);
    }
    for (const auto& [name, args] : r.calls) {
      ASSERT_TRUE(name == "get_weather" || name == "get_time") << name;
      if (seed % 4 == 1) {
        EXPECT_EQ(name, "get_time");
      }
      v.add(name == "get_weather" ? kWeatherParams : kTimeParams, args);
      ++calls;
    }
  }
  EXPECT_GE(finished, 12);
  EXPECT_GE(calls, finished);
  v.expect_valid("structured_api_tool_calls");
}

TEST(StructuredApi, AutoStrictToolsLetTextOrAValidCallThrough) {
  const std::string tools = std::string(R"("tools":[)") + kWeatherTool + "," + kTimeTool + "]";
  {
    ServiceHarness h(options("Just text."));
    ASSERT_TRUE(h.ok()) << h.error();
    const ChatResult r = chat_result(h.post(kChat, chat(tools, 1)), false);
    EXPECT_EQ(r.content, "Just text.");
    EXPECT_TRUE(r.calls.empty());
  }
  {
    // A well-formed call is not changed.
    ServiceHarness h(
        options("Checking.\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_weather\">\n"
                "<｜DSML｜ parameter name=\"location\" string=\"true\">Paris</｜DSML｜ parameter>\n"
                "<｜DSML｜ parameter name=\"days\" string=\"false\">3</｜DSML｜ parameter>\n"
                "</｜DSML｜ invoke>\n</｜DSML｜ calls>"));
    ASSERT_TRUE(h.ok()) << h.error();
    const ChatResult r = chat_result(h.post(kChat, chat(tools, 1)), false);
    EXPECT_EQ(r.content, "Checking.");
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].first, "get_weather");
    EXPECT_EQ(r.calls[0].second, R"({"location": "Paris", "days": 3})");
  }
  {
    // An undeclared tool and a wrong parameter are steered into a schema-valid call.
    ServiceHarness h(
        options("<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_wind\">\n"
                "<｜DSML｜ parameter name=\"city\" string=\"true\">Paris</｜DSML｜ parameter>\n"
                "</｜DSML｜ invoke>\n</｜DSML｜ calls>"));
    ASSERT_TRUE(h.ok()) << h.error();
    Validator v;
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      const bool stream = seed % 2 == 0;
      const ChatResult r = chat_result(h.post(kChat, chat(tools, seed, stream, seed > 3)), stream);
      if (r.finish == "length") continue;
      for (const auto& [name, args] : r.calls) {
        ASSERT_TRUE(name == "get_weather" || name == "get_time") << name;
        v.add(name == "get_weather" ? kWeatherParams : kTimeParams, args);
      }
    }
    if (v.count() > 0) v.expect_valid("structured_api_tool_steered");
  }
}

}  // namespace
}  // namespace deepinfer::server::testing
