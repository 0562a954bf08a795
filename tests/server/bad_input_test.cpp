// Bad input on every API: each case asserts the status code and the error body in the API's own
// shape (OpenAI: {"error":{"message","type","param","code"}}; Anthropic:
// {"type":"error","error":{"type","message"}}), driven through the Router and ApiService with an
// in-memory responder and a scripted model. Nothing here may crash the server.
#include <gtest/gtest.h>

#include <thread>

#include "common/json.h"
#include "service_harness.h"

namespace deepinfer::server {
namespace {

using testing::HarnessOptions;
using testing::Reply;
using testing::ServiceHarness;

constexpr const char* kChat = "/v1/chat/completions";
constexpr const char* kMessages = "/v1/messages";
constexpr const char* kResponses = "/v1/responses";
constexpr const char* kCompletions = "/v1/completions";

const std::string kUserHi = R"("messages":[{"role":"user","content":"Hi"}])";
std::string chat_body(const std::string& extra) {
  return R"({"model":"deepseek-v4-test",)" + kUserHi + R"(,"max_tokens":8)" +
         (extra.empty() ? "" : "," + extra) + "}";
}
std::string messages_body(const std::string& extra) {
  return R"({"model":"deepseek-v4-test",)" + kUserHi + R"(,"max_tokens":8)" +
         (extra.empty() ? "" : "," + extra) + "}";
}
std::string completions_body(const std::string& extra) {
  return R"({"model":"deepseek-v4-test","prompt":"Once","max_tokens":4)" +
         (extra.empty() ? "" : "," + extra) + "}";
}

// OpenAI's error object: a message, a type, a param (null here) and a code.
void expect_openai_error(const Reply& r, int status, std::string_view type) {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  auto v = parse_json(r.body);
  ASSERT_TRUE(v.ok()) << r.body;
  ASSERT_TRUE(v.value().is_object()) << r.body;
  const auto* err = v.value().as_object().if_contains("error");
  ASSERT_TRUE(err && err->is_object()) << r.body;
  const auto& e = err->as_object();
  ASSERT_TRUE(e.contains("message") && e.at("message").is_string()) << r.body;
  EXPECT_FALSE(e.at("message").as_string().empty());
  ASSERT_TRUE(e.contains("type")) << r.body;
  EXPECT_EQ(std::string(e.at("type").as_string()), std::string(type)) << r.body;
  EXPECT_TRUE(e.contains("param") && e.contains("code")) << r.body;
}

// Anthropic's error envelope.
void expect_anthropic_error(const Reply& r, int status, std::string_view type) {
  EXPECT_EQ(r.status, status) << r.body;
  auto v = parse_json(r.body);
  ASSERT_TRUE(v.ok()) << r.body;
  const auto& o = v.value().as_object();
  EXPECT_EQ(o.at("type"), "error") << r.body;
  const auto& e = o.at("error").as_object();
  EXPECT_EQ(std::string(e.at("type").as_string()), std::string(type)) << r.body;
  ASSERT_TRUE(e.at("message").is_string());
  EXPECT_FALSE(e.at("message").as_string().empty());
}

bool message_mentions(const Reply& r, std::string_view needle) {
  return r.body.find(needle) != std::string::npos;
}

class BadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { harness_ = new ServiceHarness(); }
  static void TearDownTestSuite() {
    delete harness_;
    harness_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(harness_->ok()) << harness_->error(); }
  static Reply post(const char* path, const std::string& body) {
    return harness_->post(path, body);
  }
  static ServiceHarness* harness_;
};
ServiceHarness* BadInput::harness_ = nullptr;

// --- sanity: the valid request this suite mutates is accepted -------------------------------

TEST_F(BadInput, BaselineRequestsSucceed) {
  EXPECT_EQ(post(kChat, chat_body("")).status, 200);
  EXPECT_EQ(post(kMessages, messages_body("")).status, 200);
  EXPECT_EQ(
      post(kResponses, R"({"model":"deepseek-v4-test","input":"Hi","max_output_tokens":8})").status,
      200);
  EXPECT_EQ(post(kCompletions, completions_body("")).status, 200);
}

// --- malformed bodies ------------------------------------------------------------------------

TEST_F(BadInput, ChatMalformedJson) {
  auto r = post(kChat, R"({"model":"deepseek-v4-test","messages":[)");
  expect_openai_error(r, 400, "invalid_request_error");
  EXPECT_TRUE(message_mentions(r, "Invalid JSON body"));
}
TEST_F(BadInput, ChatEmptyBody) {
  expect_openai_error(post(kChat, ""), 400, "invalid_request_error");
}
TEST_F(BadInput, ChatBodyNotAnObject) {
  auto r = post(kChat, "[1,2,3]");
  expect_openai_error(r, 400, "invalid_request_error");
  EXPECT_TRUE(message_mentions(r, "must be a JSON object"));
}
TEST_F(BadInput, ChatTrailingGarbage) {
  expect_openai_error(post(kChat, chat_body("") + "xyz"), 400, "invalid_request_error");
}
TEST_F(BadInput, ChatInvalidUtf8InContent) {
  std::string body = R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":"a)";
  body += "\xff\xfe\xc3";
  body += R"("}]})";
  expect_openai_error(post(kChat, body), 400, "invalid_request_error");
}
TEST_F(BadInput, ChatDeeplyNestedJson) {
  std::string body = R"({"model":"deepseek-v4-test","messages":)" + std::string(100000, '[');
  expect_openai_error(post(kChat, body), 400, "invalid_request_error");
}
TEST_F(BadInput, MessagesMalformedJson) {
  expect_anthropic_error(post(kMessages, "{not json"), 400, "invalid_request_error");
}
TEST_F(BadInput, MessagesInvalidUtf8) {
  expect_anthropic_error(post(kMessages, messages_body(R"("system":")"
                                                       "\xc0\xaf"
                                                       R"(")")),
                         400, "invalid_request_error");
}
TEST_F(BadInput, ResponsesMalformedJson) {
  expect_openai_error(post(kResponses, R"({"model":"deepseek-v4-test","input":)"), 400,
                      "invalid_request_error");
}
TEST_F(BadInput, CompletionsMalformedJson) {
  expect_openai_error(post(kCompletions, "nul"), 400, "invalid_request_error");
}

// --- missing / wrong-typed / empty fields ----------------------------------------------------

TEST_F(BadInput, ChatMissingMessages) {
  expect_openai_error(post(kChat, R"({"model":"deepseek-v4-test"})"), 400, "invalid_request_error");
}
TEST_F(BadInput, ChatMessagesNotAnArray) {
  expect_openai_error(post(kChat, R"({"model":"deepseek-v4-test","messages":"Hi"})"), 400,
                      "invalid_request_error");
}
TEST_F(BadInput, ChatEmptyMessages) {
  auto r = post(kChat, R"({"model":"deepseek-v4-test","messages":[]})");
  expect_openai_error(r, 400, "invalid_request_error");
  EXPECT_TRUE(message_mentions(r, "Empty input messages"));
}
TEST_F(BadInput, ChatUnknownRole) {
  expect_openai_error(
      post(kChat, R"({"model":"deepseek-v4-test","messages":[{"role":"wizard","content":"Hi"}]})"),
      400, "invalid_request_error");
}
TEST_F(BadInput, ChatContentWrongType) {
  expect_openai_error(
      post(kChat, R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":42}]})"), 400,
      "invalid_request_error");
}
TEST_F(BadInput, ChatMessageNotAnObject) {
  expect_openai_error(post(kChat, R"({"model":"deepseek-v4-test","messages":["Hi"]})"), 400,
                      "invalid_request_error");
}
TEST_F(BadInput, ChatModelWrongType) {
  expect_openai_error(post(kChat, R"({"model":7,"messages":[{"role":"user","content":"Hi"}]})"),
                      400, "invalid_request_error");
}
TEST_F(BadInput, ChatStreamWrongType) {
  expect_openai_error(post(kChat, chat_body(R"("stream":"yes")")), 400, "invalid_request_error");
}
TEST_F(BadInput, ChatToolsWrongType) {
  expect_openai_error(post(kChat, chat_body(R"("tools":"get_weather")")), 400,
                      "invalid_request_error");
}
TEST_F(BadInput, ChatStopWrongType) {
  expect_openai_error(post(kChat, chat_body(R"("stop":{"a":1})")), 400, "invalid_request_error");
}
TEST_F(BadInput, ChatUnknownFieldsAreIgnored) {
  auto r = post(kChat, chat_body(R"("x_custom_field":{"anything":[1,2]},"user":"u-1")"));
  EXPECT_EQ(r.status, 200) << r.body;
}
TEST_F(BadInput, ChatStreamOptionsWithoutStream) {
  auto r = post(kChat, chat_body(R"("stream_options":{"include_usage":true})"));
  expect_openai_error(r, 400, "invalid_request_error");
  EXPECT_TRUE(message_mentions(r, "stream_options"));
}
TEST_F(BadInput, MessagesMissingMaxTokensOrMessages) {
  expect_anthropic_error(post(kMessages, R"({"model":"deepseek-v4-test","max_tokens":8})"), 400,
                         "invalid_request_error");
}
TEST_F(BadInput, MessagesEmptyMessages) {
  expect_anthropic_error(
      post(kMessages, R"({"model":"deepseek-v4-test","max_tokens":8,"messages":[]})"), 400,
      "invalid_request_error");
}
TEST_F(BadInput, MessagesSystemWrongType) {
  expect_anthropic_error(post(kMessages, messages_body(R"("system":17)")), 400,
                         "invalid_request_error");
}
TEST_F(BadInput, MessagesUnknownFieldsAreIgnored) {
  EXPECT_EQ(post(kMessages, messages_body(R"("x_unknown":true)")).status, 200);
}
TEST_F(BadInput, ResponsesMissingInput) {
  expect_openai_error(post(kResponses, R"({"model":"deepseek-v4-test"})"), 400,
                      "invalid_request_error");
}
TEST_F(BadInput, ResponsesInputWrongType) {
  expect_openai_error(post(kResponses, R"({"model":"deepseek-v4-test","input":12})"), 400,
                      "invalid_request_error");
}
TEST_F(BadInput, CompletionsMissingPrompt) {
  auto r = post(kCompletions, R"({"model":"deepseek-v4-test"})");
  expect_openai_error(r, 400, "invalid_request_error");
  EXPECT_TRUE(message_mentions(r, "prompt"));
}
TEST_F(BadInput, CompletionsEmptyPrompt) {
  expect_openai_error(post(kCompletions, R"({"model":"deepseek-v4-test","prompt":""})"), 400,
                      "invalid_request_error");
  expect_openai_error(post(kCompletions, R"({"model":"deepseek-v4-test","prompt":[]})"), 400,
                      "invalid_request_error");
}
TEST_F(BadInput, CompletionsTokenIdOutsideVocabulary) {
  expect_openai_error(post(kCompletions, R"({"model":"deepseek-v4-test","prompt":[1,2,99999999]})"),
                      400, "invalid_request_error");
  expect_openai_error(post(kCompletions, R"({"model":"deepseek-v4-test","prompt":[-1]})"), 400,
                      "invalid_request_error");
}
TEST_F(BadInput, CompletionsSuffixUnsupported) {
  expect_openai_error(post(kCompletions, completions_body(R"("suffix":"end")")), 400,
                      "invalid_request_error");
}

// --- numbers: ranges, types, enormous values -------------------------------------------------

TEST_F(BadInput, TemperatureWrongTypeAndRange) {
  expect_openai_error(post(kChat, chat_body(R"("temperature":"hot")")), 400,
                      "invalid_request_error");
  expect_openai_error(post(kChat, chat_body(R"("temperature":1e308)")), 400,
                      "invalid_request_error");
  expect_openai_error(post(kChat, chat_body(R"("temperature":-0.5)")), 400,
                      "invalid_request_error");
}
TEST_F(BadInput, TopPOutOfRange) {
  expect_openai_error(post(kChat, chat_body(R"("top_p":0)")), 400, "invalid_request_error");
  expect_openai_error(post(kCompletions, completions_body(R"("top_p":1.5)")), 400,
                      "invalid_request_error");
}
TEST_F(BadInput, EnormousMaxTokens) {
  const std::string base =
      R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":"Hi"}],"max_tokens":)";
  expect_openai_error(post(kChat, base + "1e400}"), 400, "invalid_request_error");
  expect_openai_error(post(kChat, base + "99999999999999999999999}"), 400, "invalid_request_error");
  expect_openai_error(post(kChat, base + "-5}"), 400, "invalid_request_error");
  expect_openai_error(post(kChat, base + "0}"), 400, "invalid_request_error");
  expect_openai_error(post(kChat, base + "2.5}"), 400, "invalid_request_error");
}
TEST_F(BadInput, MaxTokensBeyondContext) {
  auto r = post(
      kChat,
      R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":"Hi"}],"max_tokens":100000})");
  expect_openai_error(r, 400, "invalid_request_error");
  EXPECT_TRUE(message_mentions(r, "maximum context length of 512 tokens")) << r.body;
  expect_anthropic_error(
      post(
          kMessages,
          R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":"Hi"}],"max_tokens":100000})"),
      400, "invalid_request_error");
  expect_openai_error(
      post(kCompletions, R"({"model":"deepseek-v4-test","prompt":"Hi","max_tokens":100000})"), 400,
      "invalid_request_error");
}
TEST_F(BadInput, PromptTooLong) {
  std::string text;
  for (int i = 0; i < 800; ++i) text += "w" + std::to_string(i * 7919 % 10007) + " ";
  auto r = post(kChat, R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":")" +
                           text + R"("}]})");
  expect_openai_error(r, 400, "invalid_request_error");
  EXPECT_TRUE(message_mentions(r, "maximum context length is 512 tokens")) << r.body;
  expect_anthropic_error(
      post(kMessages,
           R"({"model":"deepseek-v4-test","max_tokens":8,"messages":[{"role":"user","content":")" +
               text + R"("}]})"),
      400, "invalid_request_error");
  expect_openai_error(
      post(kCompletions, R"({"model":"deepseek-v4-test","prompt":")" + text + R"("})"), 400,
      "invalid_request_error");
}
TEST_F(BadInput, SeedInvalid) {
  expect_openai_error(post(kChat, chat_body(R"("seed":-1)")), 400, "invalid_request_error");
  expect_openai_error(post(kChat, chat_body(R"("seed":1.5)")), 400, "invalid_request_error");
  expect_openai_error(post(kChat, chat_body(R"("seed":"42")")), 400, "invalid_request_error");
  expect_openai_error(post(kChat, chat_body(R"("seed":1e30)")), 400, "invalid_request_error");
  EXPECT_EQ(post(kChat, chat_body(R"("seed":42)")).status, 200);
}
TEST_F(BadInput, NInvalid) {
  expect_openai_error(post(kChat, chat_body(R"("n":0)")), 400, "invalid_request_error");
  expect_openai_error(post(kChat, chat_body(R"("n":17)")), 400, "invalid_request_error");
  expect_openai_error(post(kChat, chat_body(R"("n":"2")")), 400, "invalid_request_error");
  expect_openai_error(post(kChat, chat_body(R"("n":1e300)")), 400, "invalid_request_error");
}
TEST_F(BadInput, LogitBiasInvalid) {
  expect_openai_error(post(kChat, chat_body(R"("logit_bias":[1,2])")), 400,
                      "invalid_request_error");
  expect_openai_error(post(kChat, chat_body(R"("logit_bias":{"abc":1})")), 400,
                      "invalid_request_error");
  expect_openai_error(post(kChat, chat_body(R"("logit_bias":{"99999999":1})")), 400,
                      "invalid_request_error");
  expect_openai_error(post(kChat, chat_body(R"("logit_bias":{"5":1000})")), 400,
                      "invalid_request_error");
  expect_openai_error(post(kChat, chat_body(R"("logit_bias":{"5":"up"})")), 400,
                      "invalid_request_error");
  EXPECT_EQ(post(kChat, chat_body(R"("logit_bias":{"5":-100})")).status, 200);
}
TEST_F(BadInput, TopLogprobsInvalid) {
  expect_openai_error(post(kChat, chat_body(R"("logprobs":true,"top_logprobs":21)")), 400,
                      "invalid_request_error");
  expect_openai_error(post(kChat, chat_body(R"("top_logprobs":3)")), 400, "invalid_request_error");
  expect_openai_error(post(kChat, chat_body(R"("logprobs":5)")), 400, "invalid_request_error");
  expect_openai_error(post(kCompletions, completions_body(R"("logprobs":21)")), 400,
                      "invalid_request_error");
}
std::string responses_body(const std::string& extra) {
  return R"({"model":"deepseek-v4-test","input":"Hi","max_output_tokens":8)" +
         (extra.empty() ? "" : "," + extra) + "}";
}
// Responses top_logprobs is an integer in [0, 20]; include an array of strings.
TEST_F(BadInput, ResponsesTopLogprobsInvalid) {
  const std::string include = R"("include":["message.output_text.logprobs"],)";
  for (const char* bad : {"21", "-1", "\"3\"", "2.5", "true", "1e300"}) {
    auto r = post(kResponses, responses_body(include + R"("top_logprobs":)" + bad));
    expect_openai_error(r, 400, "invalid_request_error");
    EXPECT_TRUE(message_mentions(r, "top_logprobs must be an integer in [0, 20]")) << bad;
  }
  // Also without include (the value is still checked).
  expect_openai_error(post(kResponses, responses_body(R"("top_logprobs":21)")), 400,
                      "invalid_request_error");
  EXPECT_EQ(post(kResponses, responses_body(include + R"("top_logprobs":20)")).status, 200);
  EXPECT_EQ(post(kResponses, responses_body(include + R"("top_logprobs":0)")).status, 200);
}
TEST_F(BadInput, ResponsesIncludeInvalid) {
  for (const char* bad : {R"("message.output_text.logprobs")", "[1]", "{}", "7"}) {
    auto r = post(kResponses, responses_body(std::string(R"("include":)") + bad));
    expect_openai_error(r, 400, "invalid_request_error");
    EXPECT_TRUE(message_mentions(r, "include must be an array of strings")) << bad;
  }
  // Other include values are accepted (and do nothing here).
  EXPECT_EQ(post(kResponses, responses_body(R"("include":["reasoning.encrypted_content"])")).status,
            200);
}
TEST_F(BadInput, PenaltiesOutOfRange) {
  expect_openai_error(post(kChat, chat_body(R"("presence_penalty":3)")), 400,
                      "invalid_request_error");
  expect_openai_error(post(kChat, chat_body(R"("frequency_penalty":-2.5)")), 400,
                      "invalid_request_error");
  expect_openai_error(post(kChat, chat_body(R"("repetition_penalty":0)")), 400,
                      "invalid_request_error");
}
TEST_F(BadInput, StopTokenIdsInvalid) {
  expect_openai_error(post(kChat, chat_body(R"("stop_token_ids":[999999])")), 400,
                      "invalid_request_error");
  expect_openai_error(post(kChat, chat_body(R"("stop_token_ids":5)")), 400,
                      "invalid_request_error");
}
TEST_F(BadInput, NInvalidOnStreamsAndLegacyCompletions) {
  auto r = post(kChat, chat_body(R"("n":17,"stream":true)"));
  expect_openai_error(r, 400, "invalid_request_error");
  EXPECT_TRUE(message_mentions(r, "n must be"));
  expect_openai_error(post(kCompletions, completions_body(R"("n":0)")), 400,
                      "invalid_request_error");
  expect_openai_error(post(kCompletions, completions_body(R"("n":2.5,"stream":true)")), 400,
                      "invalid_request_error");
  expect_openai_error(post(kCompletions, completions_body(R"("logprobs":"3")")), 400,
                      "invalid_request_error");
}

// --- routing ---------------------------------------------------------------------------------

TEST_F(BadInput, UnknownModel) {
  auto r = post(kChat, R"({"model":"gpt-9","messages":[{"role":"user","content":"Hi"}]})");
  expect_openai_error(r, 404, "not_found_error");
  EXPECT_TRUE(message_mentions(r, "gpt-9"));
  expect_anthropic_error(
      post(kMessages,
           R"({"model":"claude-x","max_tokens":8,"messages":[{"role":"user","content":"Hi"}]})"),
      404, "not_found_error");
  expect_openai_error(post(kResponses, R"({"model":"nope","input":"Hi"})"), 404, "not_found_error");
  expect_openai_error(post(kCompletions, R"({"model":"nope","prompt":"Hi"})"), 404,
                      "not_found_error");
}
TEST_F(BadInput, UnknownPath) {
  expect_openai_error(harness_->call("GET", "/v1/nothing"), 404, "not_found_error");
  expect_anthropic_error(harness_->call("POST", "/v1/messages/batches", "{}"), 404,
                         "not_found_error");
}
TEST_F(BadInput, WrongMethod) {
  expect_openai_error(harness_->call("GET", kChat), 405, "invalid_request_error");
  expect_openai_error(harness_->call("DELETE", "/v1/models"), 405, "invalid_request_error");
  expect_anthropic_error(harness_->call("PUT", kMessages, messages_body("")), 405,
                         "invalid_request_error");
}
TEST_F(BadInput, QueryStringIsNotPartOfThePath) {
  EXPECT_EQ(post("/v1/chat/completions?x=1", chat_body("")).status, 200);
}

// --- server-wide gates: auth, loading, admission ---------------------------------------------

TEST(BadInputGates, MissingOrWrongApiKeyIs401) {
  HarnessOptions o;
  o.api_key = "sekret";
  ServiceHarness h(o);
  ASSERT_TRUE(h.ok()) << h.error();
  auto r = h.post(kChat, chat_body(""));
  expect_openai_error(r, 401, "authentication_error");
  expect_openai_error(h.post(kChat, chat_body(""), {{"authorization", "Bearer wrong"}}), 401,
                      "authentication_error");
  expect_openai_error(h.post(kChat, chat_body(""), {{"authorization", "sekret"}}), 401,
                      "authentication_error");
  expect_anthropic_error(h.post(kMessages, messages_body("")), 401, "authentication_error");
  // Both header styles are accepted, on every API.
  EXPECT_EQ(h.post(kChat, chat_body(""), {{"authorization", "Bearer sekret"}}).status, 200);
  EXPECT_EQ(h.post(kMessages, messages_body(""),
                   {{"x-api-key", "sekret"}, {"anthropic-version", "2099-01-01"}})
                .status,
            200);
  // /health and /metrics need no key.
  EXPECT_EQ(h.call("GET", "/health").status, 200);
  EXPECT_EQ(h.call("GET", "/metrics").status, 200);
}

TEST(BadInputGates, LoadingIs503WithRetryAfter) {
  HarnessOptions o;
  o.ready = false;
  ServiceHarness h(o);
  ASSERT_TRUE(h.ok()) << h.error();
  auto r = h.post(kChat, chat_body(""));
  expect_openai_error(r, 503, "service_unavailable");
  EXPECT_EQ(r.header("Retry-After"), "1");
  auto m = h.post(kMessages, messages_body(""));
  expect_anthropic_error(m, 503, "overloaded_error");
  EXPECT_EQ(m.header("Retry-After"), "1");
  EXPECT_EQ(h.call("GET", "/health").status, 503);  // not healthy until the model is loaded
  EXPECT_EQ(h.call("GET", "/metrics").status, 200);
  h.router().set_ready(true);
  EXPECT_EQ(h.call("GET", "/health").status, 200);
  EXPECT_EQ(h.post(kChat, chat_body("")).status, 200);
}

TEST(BadInputGates, TooManyConcurrentRequestsIs429WithRetryAfter) {
  HarnessOptions o;
  o.max_concurrent = 1;
  o.step_delay = std::chrono::milliseconds(2);
  ServiceHarness h(o);
  ASSERT_TRUE(h.ok()) << h.error();
  // One long stream holds the only slot.
  auto first = h.start(
      "POST", kChat,
      R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":"Hi"}],"max_tokens":400,"ignore_eos":true,"stream":true})");
  ASSERT_TRUE(first->wait_writes(1));
  auto r = h.post(kChat, chat_body(""));
  expect_openai_error(r, 429, "rate_limit_error");
  EXPECT_EQ(r.header("Retry-After"), "1");
  auto m = h.post(kMessages, messages_body(""));
  expect_anthropic_error(m, 429, "rate_limit_error");
  EXPECT_EQ(m.header("Retry-After"), "1");
  expect_openai_error(h.post(kCompletions, completions_body("")), 429, "rate_limit_error");
  first->disconnect();  // frees the slot
  ASSERT_TRUE(first->wait());
  for (int i = 0; i < 200 && h.api().in_flight() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(h.post(kChat, chat_body("")).status, 200);
}

}  // namespace
}  // namespace deepinfer::server
