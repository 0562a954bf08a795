// logprobs in OpenAI's shapes, checked against the engine's own sample results (the scripted
// model's logits do not depend on the prompt, so a direct engine request yields the same
// tokens, logprobs and top lists as the HTTP one):
// - Chat `choices[].logprobs = {"content":[{token,logprob,bytes,top_logprobs}],"refusal":null}`
//   on complete responses, and per chunk on streams (the chunks together = the complete list);
// - legacy Completions `logprobs: N` → {text_offset, token_logprobs, tokens, top_logprobs}, on
//   the complete object and per chunk (text_offset continuing across chunks).
#include "server/logprobs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>

#include "common/json.h"
#include "logprobs_util.h"
#include "service_harness.h"
#include "sse_util.h"

namespace deepinfer::server {
namespace {

using testing::engine_samples;
using testing::ServiceHarness;
using testing::sse_data;
using testing::token_text;

constexpr const char* kScript = "Thinking it over.</think>Hello there.";

float as_float(const Json& v) { return static_cast<float>(v.to_number<double>()); }

void expect_chat_entry(const ServiceHarness& h, const Json& entry, int32_t token, float logprob) {
  const auto& o = entry.as_object();
  EXPECT_EQ(std::string(o.at("token").as_string()), token_text(h, token));
  EXPECT_EQ(as_float(o.at("logprob")), logprob);
  const std::string_view raw = h.tokenizer().token_bytes(token);
  const auto& bytes = o.at("bytes").as_array();
  ASSERT_EQ(bytes.size(), raw.size());
  for (size_t i = 0; i < raw.size(); ++i)
    EXPECT_EQ(bytes[i].as_int64(), static_cast<unsigned char>(raw[i]));
}

// Chat content entries against the engine's samples, with `top` top_logprobs each.
void expect_chat_content(const ServiceHarness& h, const JsonArray& content,
                         const std::vector<engine::SampleResult>& samples, int top) {
  ASSERT_EQ(content.size(), samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto& s = samples[i];
    expect_chat_entry(h, content[i], s.token, s.logprob);
    const auto& tops = content[i].at("top_logprobs").as_array();
    ASSERT_EQ(static_cast<int>(tops.size()), std::min(top, s.num_top));
    for (size_t k = 0; k < tops.size(); ++k) {
      expect_chat_entry(h, tops[k], s.top[k].token, s.top[k].logprob);
      EXPECT_FALSE(tops[k].as_object().contains("top_logprobs"));
    }
  }
}

TEST(ChatLogprobs, CompleteResponseMatchesTheEngine) {
  ServiceHarness h;
  ASSERT_TRUE(h.ok()) << h.error();
  auto r = h.post(
      "/v1/chat/completions",
      R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":"Hi"}],"logprobs":true,"top_logprobs":2})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto v = parse_json(r.body);
  ASSERT_TRUE(v.ok());
  const auto& logprobs = v.value().at("choices").at(0).at("logprobs").as_object();
  EXPECT_TRUE(logprobs.at("refusal").is_null());
  const auto& content = logprobs.at("content").as_array();
  expect_chat_content(h, content, engine_samples(h, 2), 2);
  std::string spelled;
  for (const auto& e : content) spelled += std::string(e.at("token").as_string());
  EXPECT_EQ(spelled, kScript);
  // The model puts (almost) all mass on the script: each logprob is ~0, the runner-up ~-60.
  EXPECT_NEAR(content[0].at("logprob").to_number<double>(), 0.0, 1e-3);
  EXPECT_NEAR(content[0].at("top_logprobs").at(1).at("logprob").to_number<double>(), -60.0, 1e-3);

  // Without logprobs the field stays null.
  auto plain =
      h.post("/v1/chat/completions",
             R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":"Hi"}]})");
  ASSERT_EQ(plain.status, 200);
  EXPECT_TRUE(parse_json(plain.body).value().at("choices").at(0).at("logprobs").is_null());
}

TEST(ChatLogprobs, StreamChunksTogetherHoldTheCompleteList) {
  ServiceHarness h;
  ASSERT_TRUE(h.ok()) << h.error();
  const std::string base =
      R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":"Hi"}],"logprobs":true,"top_logprobs":3)";
  auto full = h.post("/v1/chat/completions", base + "}");
  ASSERT_EQ(full.status, 200) << full.body;
  const Json complete =
      parse_json(full.body).value().at("choices").at(0).at("logprobs").at("content");

  for (const char* n : {"1", "2"}) {
    auto r = h.post("/v1/chat/completions", base + R"(,"stream":true,"n":)" + n + "}");
    ASSERT_EQ(r.status, 200) << r.body;
    std::map<int64_t, JsonArray> per_choice;
    int with_logprobs = 0;
    for (const auto& data : sse_data(r.body)) {
      if (data == "[DONE]") continue;
      auto v = parse_json(data);
      ASSERT_TRUE(v.ok()) << data;
      const auto& c = v.value().at("choices").at(0).as_object();
      const Json& lp = c.at("logprobs");
      JsonArray& acc = per_choice[c.at("index").as_int64()];
      if (lp.is_null()) continue;
      ++with_logprobs;
      ASSERT_TRUE(lp.as_object().at("refusal").is_null()) << data;
      const auto& content = lp.at("content").as_array();
      EXPECT_FALSE(content.empty()) << data;
      for (const auto& e : content) acc.push_back(e);
    }
    ASSERT_EQ(per_choice.size(), std::string(n) == "1" ? 1u : 2u);
    for (const auto& [index, acc] : per_choice)
      EXPECT_EQ(Json(acc), complete) << "choice " << index;
    EXPECT_GT(with_logprobs, 3);  // spread over the stream, not one block at the end
  }
  expect_chat_content(h, complete.as_array(), engine_samples(h, 3), 3);
}

// Legacy Completions: the four parallel arrays of the sampled tokens.
void expect_completion_logprobs(const ServiceHarness& h, const JsonObject& lp,
                                const std::vector<engine::SampleResult>& samples, int top) {
  const auto& offsets = lp.at("text_offset").as_array();
  const auto& logprobs = lp.at("token_logprobs").as_array();
  const auto& tokens = lp.at("tokens").as_array();
  const auto& tops = lp.at("top_logprobs").as_array();
  ASSERT_EQ(tokens.size(), samples.size());
  ASSERT_EQ(offsets.size(), samples.size());
  ASSERT_EQ(logprobs.size(), samples.size());
  ASSERT_EQ(tops.size(), samples.size());
  int64_t offset = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto& s = samples[i];
    const std::string text = token_text(h, s.token);
    EXPECT_EQ(std::string(tokens[i].as_string()), text);
    EXPECT_EQ(as_float(logprobs[i]), s.logprob);
    EXPECT_EQ(offsets[i].as_int64(), offset);
    offset += static_cast<int64_t>(text.size());  // ASCII script: bytes = code points
    // The top N (the sampled token is the likeliest here), keyed by token text.
    const auto& dict = tops[i].as_object();
    ASSERT_EQ(static_cast<int>(dict.size()), std::min(top, s.num_top));
    size_t k = 0;
    for (const auto& [key, value] : dict) {
      EXPECT_EQ(std::string(key), token_text(h, s.top[k].token));
      EXPECT_EQ(as_float(value), s.top[k].logprob);
      ++k;
    }
    EXPECT_EQ(std::string(dict.begin()->key()), text);
  }
}

TEST(CompletionsLogprobs, CompleteAndStreamMatchTheEngine) {
  ServiceHarness h;
  ASSERT_TRUE(h.ok()) << h.error();
  const std::string base =
      R"({"model":"deepseek-v4-test","prompt":"Hi","max_tokens":64,"logprobs":3)";
  auto full = h.post("/v1/completions", base + "}");
  ASSERT_EQ(full.status, 200) << full.body;
  auto v = parse_json(full.body);
  ASSERT_TRUE(v.ok());
  const auto& choice = v.value().at("choices").at(0).as_object();
  const auto samples = engine_samples(h, 3);
  expect_completion_logprobs(h, choice.at("logprobs").as_object(), samples, 3);
  std::string joined;
  for (const auto& t : choice.at("logprobs").at("tokens").as_array())
    joined += std::string(t.as_string());
  EXPECT_EQ(joined, kScript);

  // Stream: the chunks' arrays concatenate to the complete ones (offsets continue).
  auto r = h.post("/v1/completions", base + R"(,"stream":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  JsonObject merged;
  for (const char* key : {"text_offset", "token_logprobs", "tokens", "top_logprobs"})
    merged[key] = JsonArray();
  for (const auto& data : sse_data(r.body)) {
    if (data == "[DONE]") continue;
    auto c = parse_json(data);
    ASSERT_TRUE(c.ok()) << data;
    const Json& lp = c.value().at("choices").at(0).at("logprobs");
    if (lp.is_null()) continue;
    for (const auto& [key, value] : lp.as_object())
      for (const auto& e : value.as_array()) merged[key].as_array().push_back(e);
  }
  EXPECT_EQ(Json(merged), choice.at("logprobs"));

  // Without logprobs the field is null.
  auto plain = h.post("/v1/completions", R"({"model":"deepseek-v4-test","prompt":"Hi"})");
  ASSERT_EQ(plain.status, 200);
  EXPECT_TRUE(parse_json(plain.body).value().at("choices").at(0).at("logprobs").is_null());
}

// The writer on its own: code-point offsets over multi-byte text, the sampled token added to
// top_logprobs when it is not among the top N, duplicate keys dropped, -inf written as -9999.0.
TEST(TokenLogprobsWriter, OffsetsSampledTokenDuplicatesAndInfinity) {
  ServiceHarness h;
  ASSERT_TRUE(h.ok()) << h.error();
  const auto ids = h.tokenizer().encode("h\xC3\xA9llo w\xC3\xB6rld").value();
  TokenLogprobs lp(h.tokenizer(), LogprobsFormat::Completions, 2);
  std::vector<int64_t> want_offsets;
  int64_t offset = 0;
  for (int32_t id : ids) {
    engine::SampleResult s;
    s.token = id;
    s.logprob = -0.5f;
    s.num_top = 2;
    s.top[0] = {ids[0], -0.25f};
    s.top[1] = {ids[0], -0.75f};  // same text as top[0]: dropped
    lp.add(s);
    want_offsets.push_back(offset);
    for (char c : h.tokenizer().token_bytes(id))
      offset += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }
  auto v = parse_json(lp.next_chunk_logprobs());
  ASSERT_TRUE(v.ok());
  const auto& offsets = v.value().at("text_offset").as_array();
  ASSERT_EQ(offsets.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(offsets[i].as_int64(), want_offsets[i]);
  EXPECT_EQ(offset, 11);  // "héllo wörld" has 11 code points
  const auto& top1 = v.value().at("top_logprobs").at(1).as_object();
  ASSERT_EQ(top1.size(), ids[1] == ids[0] ? 1u : 2u);
  EXPECT_EQ(as_float(top1.at(token_text(h, ids[0]))), -0.25f);
  if (ids[1] != ids[0]) {
    EXPECT_EQ(as_float(top1.at(token_text(h, ids[1]))), -0.5f);
  }
  EXPECT_TRUE(lp.next_chunk_logprobs().empty());  // nothing new

  engine::SampleResult inf;
  inf.token = ids[0];
  inf.logprob = -std::numeric_limits<float>::infinity();
  lp.add(inf);
  const std::string text(lp.next_chunk_logprobs());
  EXPECT_NE(text.find("\"token_logprobs\":[-9999.0]"), std::string::npos) << text;
  EXPECT_NE(text.find("\"text_offset\":[11]"), std::string::npos) << text;  // continues
}

}  // namespace
}  // namespace deepinfer::server
