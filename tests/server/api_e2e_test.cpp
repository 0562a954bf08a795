// The whole API path over loopback HTTP: request → recipe conversion → V4.1 render → segment
// tokenization → engine (a scripted model emitting reasoning, text and a DSML tool call) →
// detokenizer → output parser → each API's events / complete response. Then the official
// OpenAI and Anthropic SDKs (node) against the same server.
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "scripted_model.h"
#include "server/api_service.h"
#include "server/http_server.h"
#include "server/router.h"
#include "tokenizer/cache_dir.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

constexpr const char* kScript =
    "Let me check the weather.</think>I'll look it up.\n\n<｜DSML｜ calls>\n"
    "<｜DSML｜ invoke name=\"get_weather\">\n"
    "<｜DSML｜ parameter name=\"city\" string=\"true\">Paris</｜DSML｜ parameter>\n"
    "</｜DSML｜ invoke>\n</｜DSML｜ calls>";

struct Reply {
  int status = 0;
  std::string body;
};

Reply post(uint16_t port, const std::string& target, const std::string& body) {
  boost::asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
  http::request<http::string_body> req{http::verb::post, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  beast::error_code ec;
  http::read(stream, buffer, res, ec);
  return {static_cast<int>(res.result_int()), res.body()};
}

Json parse(const std::string& text) {
  auto v = parse_json(text);
  EXPECT_TRUE(v.ok()) << text;
  return v.ok() ? v.value() : Json{};
}

const char* kTools =
    R"("tools":[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}])";

// The scripted answer as a Chat Completions stream: its deltas concatenate to the complete answer.
void expect_weather_stream(const std::string& sse) {
  std::string reasoning, content, args, name, finish;
  size_t pos = 0;
  bool done = false;
  while ((pos = sse.find("data: ", pos)) != std::string::npos) {
    const size_t end = sse.find("\n\n", pos);
    const std::string data = sse.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    Json chunk = parse(data);
    const auto& c = chunk.at("choices").at(0).as_object();
    const auto& d = c.at("delta").as_object();
    if (auto* x = d.if_contains("reasoning_content"); x && x->is_string())
      reasoning += x->as_string();
    if (auto* x = d.if_contains("content"); x && x->is_string()) content += x->as_string();
    if (auto* tc = d.if_contains("tool_calls")) {
      const auto& f = tc->at(0).at("function").as_object();
      if (auto* n = f.if_contains("name")) name += n->as_string();
      args += f.at("arguments").as_string();
    }
    if (c.at("finish_reason").is_string()) finish = c.at("finish_reason").as_string();
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(reasoning, "Let me check the weather.");
  EXPECT_EQ(content, "I'll look it up.");
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(args, "{\"city\": \"Paris\"}");
  EXPECT_EQ(finish, "tool_calls");
}

class ApiE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (tokenizer_) return;  // one for every suite of this fixture (it lives to the end)
    auto tok = tokenizer::Tokenizer::from_path(tokenizer::deepseek_tokenizer_dir(true));
    if (!tok.ok()) return;
    tokenizer_ = std::move(tok).value().release();
  }
  void SetUp() override {
    if (!tokenizer_) GTEST_SKIP() << "the V4.1 tokenizer is not built (scripts/setup.sh)";
    auto script = tokenizer_->encode(kScript);
    ASSERT_TRUE(script.ok());
    model_ = std::make_unique<testing::ScriptedModel>(
        static_cast<int32_t>(tokenizer_->vocab_size()), script.value(), 1);
    engine::EngineConfig config;
    config.scheduler.eos_token_ids = {1};
    config.scheduler.max_model_len = 4096;
    auto engine = engine::Engine::create(config, *model_);
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    engine_ = std::move(engine).value();
    ApiServiceOptions options;
    options.served_model_name = "deepseek-v4-flash";
    options.max_model_len = 4096;
    api_ = std::make_unique<ApiService>(options, metrics_);
    api_->attach(*tokenizer_, *engine_);
    router_ = std::make_unique<Router>("", metrics_);
    api_->register_routes(*router_);
    router_->set_ready(true);
    HttpServerOptions http_options;
    http_options.port = 0;
    http_options.io_threads = io_threads();
    server_ = std::make_unique<HttpServer>(http_options, [this](HttpRequest q, ResponderPtr r) {
      router_->handle(std::move(q), std::move(r));
    });
    ASSERT_TRUE(server_->start().ok());
  }
  void TearDown() override {
    if (server_) {
      server_->stop(200);
      server_->wait();
    }
    engine_.reset();
  }
  uint16_t port() const { return server_->port(); }
  virtual int io_threads() const { return 1; }

  static tokenizer::Tokenizer* tokenizer_;
  std::unique_ptr<testing::ScriptedModel> model_;
  std::unique_ptr<engine::Engine> engine_;
  Metrics metrics_;
  std::unique_ptr<ApiService> api_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<HttpServer> server_;
};
tokenizer::Tokenizer* ApiE2E::tokenizer_ = nullptr;

TEST_F(ApiE2E, ChatCompleteHasReasoningContentAndToolCall) {
  auto r = post(
      port(), "/v1/chat/completions",
      std::string(
          R"({"model":"deepseek-v4-flash","messages":[{"role":"user","content":"Weather in Paris?"}],)") +
          kTools + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  Json v = parse(r.body);
  const auto& choice = v.at("choices").at(0).as_object();
  const auto& msg = choice.at("message").as_object();
  EXPECT_EQ(msg.at("reasoning_content"), "Let me check the weather.");
  EXPECT_EQ(msg.at("content"), "I'll look it up.");
  const auto& call = msg.at("tool_calls").at(0).as_object();
  EXPECT_EQ(call.at("function").at("name"), "get_weather");
  EXPECT_EQ(call.at("function").at("arguments"), "{\"city\": \"Paris\"}");
  EXPECT_EQ(choice.at("finish_reason"), "tool_calls");
  const auto& usage = v.at("usage").as_object();
  EXPECT_GT(usage.at("prompt_tokens").as_int64(), 10);
  EXPECT_EQ(usage.at("completion_tokens").as_int64(),
            static_cast<int64_t>(tokenizer_->encode(kScript).value().size()) + 1);  // + EOS
}

TEST_F(ApiE2E, ChatStreamConcatenatesToTheCompleteAnswer) {
  auto r = post(
      port(), "/v1/chat/completions",
      std::string(
          R"({"model":"deepseek-v4-flash","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Weather?"}],)") +
          kTools + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  expect_weather_stream(r.body);
}

// Many streams over several I/O threads at once: the engine hands each step's events to the
// threads in per-thread batches (StepBatcher), and every stream still carries its whole answer.
class ApiE2EThreads : public ApiE2E {
 protected:
  int io_threads() const override { return 3; }
};

TEST_F(ApiE2EThreads, ConcurrentStreamsEachCarryTheWholeAnswer) {
  constexpr int kStreams = 24;
  std::vector<Reply> replies(kStreams);
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i)
    clients.emplace_back([this, i, &replies] {
      replies[static_cast<size_t>(i)] = post(
          port(), "/v1/chat/completions",
          std::string(
              R"({"model":"deepseek-v4-flash","stream":true,"messages":[{"role":"user","content":"Weather?"}],)") +
              kTools + "}");
    });
  for (auto& t : clients) t.join();
  for (const Reply& r : replies) {
    ASSERT_EQ(r.status, 200) << r.body;
    expect_weather_stream(r.body);
  }
}

TEST_F(ApiE2E, MessagesCompleteHasThinkingTextAndToolUse) {
  auto r = post(
      port(), "/v1/messages",
      R"({"model":"deepseek-v4-flash","max_tokens":200,"messages":[{"role":"user","content":"Weather?"}],"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json v = parse(r.body);
  const auto& content = v.at("content").as_array();
  ASSERT_EQ(content.size(), 3u) << r.body;
  EXPECT_EQ(content[0].at("type"), "thinking");
  EXPECT_EQ(content[0].at("thinking"), "Let me check the weather.");
  EXPECT_EQ(content[1].at("text"), "I'll look it up.");
  EXPECT_EQ(content[2].at("type"), "tool_use");
  EXPECT_EQ(content[2].at("input").at("city"), "Paris");
  EXPECT_EQ(v.at("stop_reason"), "tool_use");
}

TEST_F(ApiE2E, ResponsesCompleteHasReasoningMessageAndFunctionCall) {
  auto r = post(
      port(), "/v1/responses",
      R"({"model":"deepseek-v4-flash","input":"Weather?","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json v = parse(r.body);
  const auto& output = v.at("output").as_array();
  ASSERT_EQ(output.size(), 3u) << r.body;
  EXPECT_EQ(output[0].at("type"), "reasoning");
  EXPECT_EQ(output[1].at("type"), "message");
  EXPECT_EQ(output[2].at("type"), "function_call");
  EXPECT_EQ(output[2].at("arguments"), "{\"city\": \"Paris\"}");
  EXPECT_EQ(v.at("status"), "completed");
}

TEST_F(ApiE2E, RequestErrorsAreApiShaped) {
  auto r = post(port(), "/v1/chat/completions", R"({"model":"deepseek-v4-flash","messages":[]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("Empty input messages"), std::string::npos) << r.body;
  r = post(port(), "/v1/messages", "{not json");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body.rfind(R"({"type":"error","error":{"type":"invalid_request_error")", 0), 0u)
      << r.body;
  r = post(port(), "/v1/chat/completions",
           R"({"model":"nope","messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(r.status, 404);
}

TEST_F(ApiE2E, LegacyCompletionsStopsAtStopSequence) {
  auto r =
      post(port(), "/v1/completions",
           R"({"model":"deepseek-v4-flash","prompt":"Once","max_tokens":50,"stop":["weather"]})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json v = parse(r.body);
  EXPECT_EQ(v.at("object"), "text_completion");
  EXPECT_EQ(v.at("choices").at(0).at("text"), "Let me check the ");
  EXPECT_EQ(v.at("choices").at(0).at("finish_reason"), "stop");
}

TEST_F(ApiE2E, OfficialSdksParseEveryReply) {
  const std::string src = DEEPINFER_SOURCE_DIR;
  if (!std::filesystem::exists(src + "/tests/js/node_modules/openai"))
    GTEST_SKIP() << "npm packages not installed (scripts/setup.sh)";
  const std::string cmd = "node " + src + "/tests/js/sdk_e2e.mjs " + std::to_string(port());
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

}  // namespace
}  // namespace deepinfer::server
