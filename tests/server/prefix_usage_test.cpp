// Prefix-cache hits reach each API's usage: a repeated long prompt reports its cached prompt
// tokens in Chat (`prompt_tokens_details.cached_tokens`, `prompt_cache_hit_tokens`, streamed
// usage chunk too), Responses (`input_tokens_details.cached_tokens`) and Messages
// (`cache_read_input_tokens`, `input_tokens` the uncached rest), and a first request reports 0.
#include <gtest/gtest.h>

#include <string>

#include "common/json.h"
#include "service_harness.h"
#include "sse_util.h"

namespace deepinfer::server {
namespace {

using testing::ServiceHarness;
using testing::sse_data;

std::string long_text() {
  std::string s;
  for (int i = 0; i < 60; ++i) s += "word" + std::to_string(i % 7) + " ";
  return s;
}

int64_t at_path(const Json& j, std::initializer_list<const char*> path) {
  const Json* v = &j;
  for (const char* k : path) {
    const auto* o = v->if_object();
    if (!o || !o->contains(k)) {
      ADD_FAILURE() << "no \"" << k << "\" in " << to_json(j);
      return -1;
    }
    v = &o->at(k);
  }
  return v->as_int64();
}

Json parse(const std::string& body) {
  auto j = parse_json(body);
  EXPECT_TRUE(j.ok()) << body;
  return j.ok() ? j.value() : Json();
}

TEST(PrefixUsage, ChatReportsCachedPromptTokens) {
  ServiceHarness h;
  ASSERT_TRUE(h.ok()) << h.error();
  const std::string body = R"({"model":"deepseek-v4-test","max_tokens":4,"messages":[)"
                           R"({"role":"user","content":")" +
                           long_text() + R"("}]})";
  const Json cold = parse(h.post("/v1/chat/completions", body).body);
  EXPECT_EQ(at_path(cold, {"usage", "prompt_tokens_details", "cached_tokens"}), 0);
  const Json warm = parse(h.post("/v1/chat/completions", body).body);
  const int64_t prompt = at_path(warm, {"usage", "prompt_tokens"});
  const int64_t hit = at_path(warm, {"usage", "prompt_tokens_details", "cached_tokens"});
  EXPECT_GT(hit, prompt / 2) << "prompt " << prompt;
  EXPECT_LT(hit, prompt + 1);
  EXPECT_EQ(at_path(warm, {"usage", "prompt_cache_hit_tokens"}), hit);
  EXPECT_EQ(at_path(warm, {"usage", "prompt_cache_miss_tokens"}), prompt - hit);

  std::string stream = body;
  stream.insert(1, R"("stream":true,"stream_options":{"include_usage":true},)");
  const auto frames = sse_data(h.post("/v1/chat/completions", stream).body);
  ASSERT_GE(frames.size(), 2u);
  const Json last = parse(frames[frames.size() - 2]);  // the usage chunk before [DONE]
  EXPECT_EQ(at_path(last, {"usage", "prompt_tokens_details", "cached_tokens"}), hit);
}

TEST(PrefixUsage, ResponsesAndMessagesReportCachedPromptTokens) {
  ServiceHarness h;
  ASSERT_TRUE(h.ok()) << h.error();
  const std::string responses =
      R"({"model":"deepseek-v4-test","max_output_tokens":4,"input":")" + long_text() + R"("})";
  h.post("/v1/responses", responses);
  const Json r = parse(h.post("/v1/responses", responses).body);
  const int64_t r_hit = at_path(r, {"usage", "input_tokens_details", "cached_tokens"});
  EXPECT_GT(r_hit, at_path(r, {"usage", "input_tokens"}) / 2);

  const std::string messages = R"({"model":"deepseek-v4-test","max_tokens":4,"messages":[)"
                               R"({"role":"user","content":"Another text. )" +
                               long_text() + R"("}]})";
  ServiceHarness fresh;  // its cache holds nothing yet
  ASSERT_TRUE(fresh.ok()) << fresh.error();
  const Json cold = parse(fresh.post("/v1/messages", messages).body);
  EXPECT_EQ(at_path(cold, {"usage", "cache_read_input_tokens"}), 0);
  const int64_t total = at_path(cold, {"usage", "input_tokens"});
  const Json warm = parse(fresh.post("/v1/messages", messages).body);
  const int64_t m_hit = at_path(warm, {"usage", "cache_read_input_tokens"});
  EXPECT_GT(m_hit, total / 2);
  EXPECT_EQ(at_path(warm, {"usage", "input_tokens"}) + m_hit, total);
}

}  // namespace
}  // namespace deepinfer::server
