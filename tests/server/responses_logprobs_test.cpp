// Responses logprobs in OpenAI's shape: `include: ["message.output_text.logprobs"]` and
// `top_logprobs` put `[{token,logprob,bytes,top_logprobs:[{token,logprob,bytes}]}]` on the
// output_text part (complete response), on each `response.output_text.delta` (its own tokens)
// and on `response.output_text.done` (all of them). Only the message text's tokens: the
// reasoning, the `</think>` marker and tool-call markup have none.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/json.h"
#include "logprobs_util.h"
#include "service_harness.h"
#include "sse_util.h"

namespace deepinfer::server {
namespace {

using testing::engine_samples;
using testing::HarnessOptions;
using testing::ServiceHarness;
using testing::sse_data;
using testing::token_text;

constexpr const char* kText = "Hello there.";  // after "Thinking it over.</think>"

std::string request(const std::string& extra) {
  return R"({"model":"deepseek-v4-test","input":"Hi","temperature":0,"seed":7,)"
         R"("include":["message.output_text.logprobs"])" +
         (extra.empty() ? "" : "," + extra) + "}";
}

// The message item's output_text part of a response object.
const JsonObject& output_text(const Json& response) {
  for (const auto& item : response.at("output").as_array())
    if (item.at("type") == "message") return item.at("content").at(0).as_object();
  static const JsonObject none;
  ADD_FAILURE() << "no message item";
  return none;
}

std::string joined_tokens(const JsonArray& logprobs) {
  std::string s;
  for (const auto& e : logprobs) s += std::string(e.at("token").as_string());
  return s;
}

// Each entry: bytes spell the token, top_logprobs has `top` entries sorted by logprob (best
// first), and under greedy decoding the first alternative is the chosen token itself.
void expect_entries(const ServiceHarness& h, const JsonArray& logprobs, size_t top) {
  for (const auto& e : logprobs) {
    const auto& o = e.as_object();
    const std::string token(o.at("token").as_string());
    std::string from_bytes;
    for (const auto& b : o.at("bytes").as_array()) from_bytes += static_cast<char>(b.as_int64());
    EXPECT_EQ(from_bytes, token);
    const auto& tops = o.at("top_logprobs").as_array();
    ASSERT_EQ(tops.size(), top) << token;
    for (size_t k = 0; k < tops.size(); ++k) {
      EXPECT_TRUE(tops[k].as_object().contains("bytes"));
      EXPECT_FALSE(tops[k].as_object().contains("top_logprobs"));
      if (k > 0) {
        EXPECT_GE(tops[k - 1].at("logprob").to_number<double>(),
                  tops[k].at("logprob").to_number<double>());
      }
    }
    if (top > 0) {
      EXPECT_EQ(tops[0].at("token"), o.at("token"));
      EXPECT_EQ(tops[0].at("logprob").to_number<double>(), o.at("logprob").to_number<double>());
    }
  }
  (void)h;
}

TEST(ResponsesLogprobs, CompleteResponseCarriesTheTextTokens) {
  ServiceHarness h;
  ASSERT_TRUE(h.ok()) << h.error();
  auto r = h.post("/v1/responses", request(R"("top_logprobs":3)"));
  ASSERT_EQ(r.status, 200) << r.body;
  auto v = parse_json(r.body);
  ASSERT_TRUE(v.ok()) << r.body;
  const JsonObject& part = output_text(v.value());
  EXPECT_EQ(part.at("text"), kText);
  const auto& logprobs = part.at("logprobs").as_array();
  EXPECT_EQ(joined_tokens(logprobs), kText);
  expect_entries(h, logprobs, 3);

  // The same values as the engine's samples of those tokens (the script's tail).
  const auto samples = engine_samples(h, 3);
  ASSERT_GE(samples.size(), logprobs.size());
  const size_t skip = samples.size() - logprobs.size();
  for (size_t i = 0; i < logprobs.size(); ++i) {
    const auto& s = samples[skip + i];
    EXPECT_EQ(std::string(logprobs[i].at("token").as_string()), token_text(h, s.token));
    EXPECT_EQ(static_cast<float>(logprobs[i].at("logprob").to_number<double>()), s.logprob);
  }
  // The reasoning part has no logprobs field.
  const auto& reasoning = v.value().at("output").at(0).as_object();
  ASSERT_EQ(reasoning.at("type"), "reasoning");
  EXPECT_FALSE(reasoning.at("content").at(0).as_object().contains("logprobs"));
}

TEST(ResponsesLogprobs, TopLogprobsCountAndDefault) {
  ServiceHarness h;
  ASSERT_TRUE(h.ok()) << h.error();
  for (int top : {0, 1, 5}) {
    auto r = h.post("/v1/responses", request(R"("top_logprobs":)" + std::to_string(top)));
    ASSERT_EQ(r.status, 200) << r.body;
    const Json v = parse_json(r.body).value();
    const auto& logprobs = output_text(v).at("logprobs").as_array();
    EXPECT_EQ(joined_tokens(logprobs), kText);
    expect_entries(h, logprobs, static_cast<size_t>(top));
  }
  // include alone: the chosen tokens with no alternatives.
  auto r = h.post("/v1/responses", request(""));
  ASSERT_EQ(r.status, 200) << r.body;
  const Json v = parse_json(r.body).value();
  const auto& logprobs = output_text(v).at("logprobs").as_array();
  EXPECT_EQ(joined_tokens(logprobs), kText);
  expect_entries(h, logprobs, 0);
}

TEST(ResponsesLogprobs, NotAskedStaysEmpty) {
  ServiceHarness h;
  ASSERT_TRUE(h.ok()) << h.error();
  // Without include (top_logprobs alone does not ask for them), as the spec's items show.
  for (const char* body : {R"({"model":"deepseek-v4-test","input":"Hi"})",
                           R"({"model":"deepseek-v4-test","input":"Hi","top_logprobs":2})",
                           R"({"model":"deepseek-v4-test","input":"Hi","include":[]})"}) {
    auto r = h.post("/v1/responses", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const Json v = parse_json(r.body).value();
    const JsonObject& part = output_text(v);
    EXPECT_EQ(part.at("text"), kText);
    EXPECT_TRUE(part.at("logprobs").as_array().empty()) << body;
  }
  auto s = h.post("/v1/responses", R"({"model":"deepseek-v4-test","input":"Hi","stream":true})");
  ASSERT_EQ(s.status, 200);
  for (const auto& data : sse_data(s.body)) {
    auto e = parse_json(data).value();
    if (e.at("type") == "response.output_text.delta") {
      EXPECT_TRUE(e.at("logprobs").as_array().empty()) << data;
    }
  }
}

TEST(ResponsesLogprobs, StreamDeltasTogetherEqualTheCompleteList) {
  ServiceHarness h;
  ASSERT_TRUE(h.ok()) << h.error();
  auto full = h.post("/v1/responses", request(R"("top_logprobs":2)"));
  ASSERT_EQ(full.status, 200) << full.body;
  const Json complete = output_text(parse_json(full.body).value()).at("logprobs");
  ASSERT_FALSE(complete.as_array().empty());

  auto r = h.post("/v1/responses", request(R"("top_logprobs":2,"stream":true)"));
  ASSERT_EQ(r.status, 200) << r.body;
  JsonArray from_deltas;
  std::string text;
  int deltas_with_logprobs = 0;
  bool saw_done = false;
  bool saw_completed = false;
  for (const auto& data : sse_data(r.body)) {
    auto parsed = parse_json(data);
    ASSERT_TRUE(parsed.ok()) << data;
    const auto& e = parsed.value().as_object();
    const std::string type(e.at("type").as_string());
    if (type == "response.output_text.delta") {
      text += std::string(e.at("delta").as_string());
      const auto& lp = e.at("logprobs").as_array();
      deltas_with_logprobs += !lp.empty();
      for (const auto& entry : lp) from_deltas.push_back(entry);
    } else if (type == "response.reasoning_text.delta") {
      EXPECT_FALSE(e.contains("logprobs")) << data;
    } else if (type == "response.output_text.done") {
      saw_done = true;
      EXPECT_EQ(e.at("text"), kText);
      EXPECT_EQ(e.at("logprobs"), complete);
    } else if (type == "response.content_part.done" && e.at("part").at("type") == "output_text") {
      EXPECT_EQ(e.at("part").at("logprobs"), complete);
    } else if (type == "response.completed") {
      saw_completed = true;
      EXPECT_EQ(output_text(e.at("response")).at("logprobs"), complete);
    }
  }
  EXPECT_TRUE(saw_done);
  EXPECT_TRUE(saw_completed);
  EXPECT_EQ(text, kText);
  EXPECT_EQ(Json(from_deltas), complete);
  EXPECT_GT(deltas_with_logprobs, 1);  // spread over the deltas, not one block at the end
}

// A message followed by a tool call: only the message text's tokens, none of the DSML markup.
TEST(ResponsesLogprobs, ToolCallMarkupHasNone) {
  HarnessOptions options;
  options.script =
      "Let me check.</think>I'll look it up.\n\n<｜DSML｜ calls>\n"
      "<｜DSML｜ invoke name=\"get_weather\">\n"
      "<｜DSML｜ parameter name=\"city\" string=\"true\">Paris</｜DSML｜ parameter>\n"
      "</｜DSML｜ invoke>\n</｜DSML｜ calls>";
  ServiceHarness h(options);
  ASSERT_TRUE(h.ok()) << h.error();
  const std::string tools =
      R"("tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}])";
  auto r = h.post("/v1/responses", request(tools + R"(,"top_logprobs":1)"));
  ASSERT_EQ(r.status, 200) << r.body;
  auto v = parse_json(r.body).value();
  const JsonObject& part = output_text(v);
  const std::string text(part.at("text").as_string());
  EXPECT_EQ(text, "I'll look it up.");
  const auto& logprobs = part.at("logprobs").as_array();
  // The tokens spell the text; a token may carry the text's last byte with the newlines
  // that open the tool calls.
  const std::string tokens = joined_tokens(logprobs);
  EXPECT_EQ(tokens.substr(0, text.size()), text);
  EXPECT_EQ(tokens.find("DSML"), std::string::npos) << tokens;
  EXPECT_LE(tokens.size(), text.size() + 2) << tokens;
  bool has_call = false;
  for (const auto& item : v.at("output").as_array()) has_call |= item.at("type") == "function_call";
  EXPECT_TRUE(has_call) << r.body;
}

}  // namespace
}  // namespace deepinfer::server
