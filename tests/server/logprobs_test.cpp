// Chat Completions `logprobs` / `top_logprobs` on complete responses, in OpenAI's shape:
// choices[0].logprobs.content = one entry per generated token with token, logprob, bytes and
// top_logprobs. The scripted model puts all mass on the script, so each logprob is ~0 and the
// tokens spell the script.
#include <gtest/gtest.h>

#include "common/json.h"
#include "service_harness.h"

namespace deepinfer::server {
namespace {

TEST(ChatLogprobs, CompleteResponseCarriesPerTokenLogprobs) {
  testing::ServiceHarness h;
  ASSERT_TRUE(h.ok()) << h.error();
  auto r = h.post(
      "/v1/chat/completions",
      R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":"Hi"}],"logprobs":true,"top_logprobs":2})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto v = parse_json(r.body);
  ASSERT_TRUE(v.ok());
  const auto& choice = v.value().at("choices").at(0).as_object();
  const auto& content = choice.at("logprobs").at("content").as_array();
  const auto script = h.tokenizer().encode("Thinking it over.</think>Hello there.").value();
  ASSERT_EQ(content.size(), script.size()) << r.body;
  std::string spelled;
  for (const auto& e : content) {
    const auto& o = e.as_object();
    spelled += std::string(o.at("token").as_string());
    EXPECT_NEAR(o.at("logprob").to_number<double>(), 0.0, 1e-3);
    EXPECT_FALSE(o.at("bytes").as_array().empty());
    const auto& top = o.at("top_logprobs").as_array();
    ASSERT_EQ(top.size(), 2u);
    EXPECT_EQ(top[0].at("token"), o.at("token"));
  }
  EXPECT_EQ(spelled, "Thinking it over.</think>Hello there.");

  // Without logprobs the field stays null.
  auto plain =
      h.post("/v1/chat/completions",
             R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":"Hi"}]})");
  ASSERT_EQ(plain.status, 200);
  EXPECT_TRUE(parse_json(plain.body).value().at("choices").at(0).at("logprobs").is_null());
}

}  // namespace
}  // namespace deepinfer::server
