// The life of a request beyond its happy path: a client that closes its socket mid-stream
// aborts the engine request and frees its KV blocks within an engine step; shutdown aborts
// in-flight streams cleanly; stream_options.include_usage; /metrics exposes what it promises.
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <thread>

#include "common/json.h"
#include "server/http_server.h"
#include "service_harness.h"

namespace deepinfer::server {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;
using testing::HarnessOptions;
using testing::ServiceHarness;

// The JSON payloads of an SSE body's "data:" lines ("[DONE]" included).
std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return out;
}

TEST(StreamLifecycle, ClientDisconnectAbortsAndFreesKvWithinAStep) {
  HarnessOptions o;
  o.step_delay = std::chrono::milliseconds(25);  // room for the I/O thread on a loaded machine
  ServiceHarness h(o);
  ASSERT_TRUE(h.ok()) << h.error();
  HttpServerOptions ho;
  ho.port = 0;
  HttpServer server(
      ho, [&h](HttpRequest q, ResponderPtr r) { h.router().handle(std::move(q), std::move(r)); });
  ASSERT_TRUE(server.start().ok());

  boost::asio::io_context ioc;
  tcp::socket socket(ioc);
  socket.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), server.port()));
  http::request<http::string_body> req{http::verb::post, "/v1/chat/completions", 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.body() =
      R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":"Hi"}],"max_tokens":400,"ignore_eos":true,"stream":true})";
  req.prepare_payload();
  http::write(socket, req);
  // Wait for the stream's first bytes: the request is running and holds KV blocks.
  char buf[512];
  ASSERT_GT(socket.read_some(boost::asio::buffer(buf)), 0u);
  engine::EngineMetrics before;
  for (int i = 0; i < 1000; ++i) {
    before = h.engine().metrics();
    if (before.num_running == 1 && before.kv_blocks_used > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ(before.num_running, 1);
  ASSERT_GT(before.kv_blocks_used, 0);

  socket.close();
  const int64_t steps_at_close = h.engine().metrics().num_steps;
  engine::EngineMetrics after;
  for (int i = 0; i < 2000; ++i) {
    after = h.engine().metrics();
    if (after.num_running == 0 && after.kv_blocks_used == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(after.num_running, 0);
  EXPECT_EQ(after.num_waiting, 0);
  EXPECT_EQ(after.kv_blocks_used, 0);
  // Freed before the next step after the one in flight (async scheduling may have planned one).
  EXPECT_LE(after.num_steps - steps_at_close, 2);
  EXPECT_LT(after.generated_tokens, 200);
  for (int i = 0; i < 200 && h.api().in_flight() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(h.api().in_flight(), 0);
  server.stop(100);
  server.wait();
}

TEST(StreamLifecycle, AbortAllEndsStreamsCleanly) {
  HarnessOptions o;
  o.step_delay = std::chrono::milliseconds(2);
  ServiceHarness h(o);
  ASSERT_TRUE(h.ok()) << h.error();
  auto chat = h.start(
      "POST", "/v1/chat/completions",
      R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":"Hi"}],"max_tokens":400,"ignore_eos":true,"stream":true})");
  auto messages = h.start(
      "POST", "/v1/messages",
      R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":"Hi"}],"max_tokens":400,"ignore_eos":true,"stream":true})");
  ASSERT_TRUE(chat->wait_writes(2));
  ASSERT_TRUE(messages->wait_writes(2));
  ASSERT_TRUE(chat->streamed()) << chat->reply().body;
  ASSERT_TRUE(messages->streamed()) << messages->reply().body;
  h.api().abort_all();
  ASSERT_TRUE(chat->wait());
  ASSERT_TRUE(messages->wait());
  const auto chat_events = sse_data(chat->reply().body);
  ASSERT_FALSE(chat_events.empty());
  EXPECT_EQ(chat_events.back(), "[DONE]");
  EXPECT_NE(messages->reply().body.find("event: message_stop"), std::string::npos);
  EXPECT_EQ(h.api().in_flight(), 0);
  engine::EngineMetrics after;
  for (int i = 0; i < 500; ++i) {
    after = h.engine().metrics();
    if (after.num_running == 0 && after.kv_blocks_used == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(after.num_running, 0);
  EXPECT_EQ(after.kv_blocks_used, 0);
}

TEST(StreamLifecycle, IncludeUsageAddsAFinalUsageChunk) {
  ServiceHarness h;
  ASSERT_TRUE(h.ok()) << h.error();
  const std::string base =
      R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":"Hi"}],"stream":true)";
  auto with = h.post("/v1/chat/completions", base + R"(,"stream_options":{"include_usage":true}})");
  ASSERT_EQ(with.status, 200) << with.body;
  auto events = sse_data(with.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  // api spec §7: with include_usage every non-final chunk has "usage":null, and the usage
  // object rides on the finish chunk (not a separate chunk with empty choices as OpenAI does).
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    auto v = parse_json(events[i]);
    ASSERT_TRUE(v.ok()) << events[i];
    const auto* u = v.value().as_object().if_contains("usage");
    EXPECT_TRUE(u != nullptr && u->is_null()) << events[i];
  }
  const int64_t script_tokens = static_cast<int64_t>(
      h.tokenizer().encode("Thinking it over.</think>Hello there.").value().size());
  auto check_final = [&](const std::string& data) {
    auto last = parse_json(data);
    ASSERT_TRUE(last.ok()) << data;
    const auto& obj = last.value().as_object();
    EXPECT_EQ(obj.at("choices").at(0).at("finish_reason"), "stop") << data;
    const auto& usage = obj.at("usage").as_object();
    EXPECT_EQ(usage.at("completion_tokens").as_int64(), script_tokens + 1);  // + EOS
    EXPECT_EQ(usage.at("total_tokens").as_int64(),
              usage.at("prompt_tokens").as_int64() + usage.at("completion_tokens").as_int64());
  };
  check_final(events[events.size() - 2]);

  // Without include_usage, non-final chunks carry no usage field at all.
  auto without = h.post("/v1/chat/completions", base + "}");
  ASSERT_EQ(without.status, 200);
  auto plain = sse_data(without.body);
  ASSERT_GE(plain.size(), 3u);
  for (size_t i = 0; i + 2 < plain.size(); ++i)
    EXPECT_EQ(plain[i].find("\"usage\""), std::string::npos) << plain[i];
  check_final(plain[plain.size() - 2]);

  auto legacy = h.post(
      "/v1/completions",
      R"({"model":"deepseek-v4-test","prompt":"Hi","max_tokens":4,"stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_EQ(legacy.status, 200);
  auto legacy_events = sse_data(legacy.body);
  ASSERT_GE(legacy_events.size(), 2u);
  EXPECT_EQ(legacy_events.back(), "[DONE]");
  auto legacy_last = parse_json(legacy_events[legacy_events.size() - 2]);
  ASSERT_TRUE(legacy_last.ok());
  EXPECT_EQ(legacy_last.value().at("usage").at("completion_tokens").as_int64(), 4);
}

TEST(StreamLifecycle, MetricsExposeRequestsTokensLatenciesKvPrefixAndQueue) {
  ServiceHarness h;
  ASSERT_TRUE(h.ok()) << h.error();
  const std::string long_prompt =
      R"({"model":"deepseek-v4-test","messages":[{"role":"user","content":"A prompt long enough to fill several KV blocks of sixteen tokens, so that the prefix cache has full blocks to share."}]})";
  ASSERT_EQ(h.post("/v1/chat/completions", long_prompt).status, 200);
  ASSERT_EQ(h.post("/v1/chat/completions", R"({"model":"deepseek-v4-test","messages":[]})").status,
            400);
  auto m = h.call("GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.content_type.rfind("text/plain", 0), 0u);
  const std::string& t = m.body;
  const int64_t script_tokens = static_cast<int64_t>(
      h.tokenizer().encode("Thinking it over.</think>Hello there.").value().size());
  for (const std::string& line : std::vector<std::string>{
           "# TYPE deepinfer_requests_total counter\ndeepinfer_requests_total 2\n",
           "deepinfer_requests_failed_total 1\n", "# TYPE deepinfer_prompt_tokens_total counter\n",
           "deepinfer_generation_tokens_total " + std::to_string(script_tokens + 1) + "\n",
           "# TYPE deepinfer_time_to_first_token_seconds histogram\n",
           "deepinfer_time_to_first_token_seconds_bucket{le=\"+Inf\"} 1\n",
           "deepinfer_time_to_first_token_seconds_count 1\n",
           "# TYPE deepinfer_time_per_output_token_seconds histogram\n",
           "deepinfer_time_per_output_token_seconds_count " + std::to_string(script_tokens) + "\n",
           "# TYPE deepinfer_e2e_request_latency_seconds histogram\n",
           "deepinfer_e2e_request_latency_seconds_count 1\n",
           "# TYPE deepinfer_kv_cache_usage_ratio gauge\ndeepinfer_kv_cache_usage_ratio 0\n",
           "deepinfer_kv_blocks_used 0\n", "deepinfer_kv_blocks_total 4096\n",
           "# TYPE deepinfer_prefix_cache_hit_rate gauge\n",
           "# TYPE deepinfer_requests_waiting gauge\ndeepinfer_requests_waiting 0\n",
           "deepinfer_requests_running 0\n"}) {
    EXPECT_NE(t.find(line), std::string::npos) << "missing: " << line << "\n" << t;
  }
  // The same prompt again is served from the prefix cache: the hit rate becomes positive.
  ASSERT_EQ(h.post("/v1/chat/completions", long_prompt).status, 200);
  const std::string t2 = h.call("GET", "/metrics").body;
  const size_t at = t2.find("\ndeepinfer_prefix_cache_hit_rate ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_GT(std::stod(t2.substr(at + 33)), 0.0) << t2.substr(at, 60);
}

}  // namespace
}  // namespace deepinfer::server
