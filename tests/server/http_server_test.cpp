// The transport + router over real loopback sockets: plain replies, SSE streaming from another
// thread, auth, 404/405/413 in the API's error shape, and disconnect detection.
#include "server/http_server.h"

#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <functional>
#include <mutex>
#include <thread>

#include "server/metrics.h"
#include "server/router.h"

namespace deepinfer::server {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;

struct Reply {
  int status = 0;
  std::string body;
  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
  std::map<std::string, std::string> headers;
};

Reply request(uint16_t port, http::verb method, const std::string& target, const std::string& body,
              std::vector<std::pair<std::string, std::string>> headers = {}) {
  boost::asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1");
  for (auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1 << 26);
  beast::error_code ec;
  http::read(stream, buffer, parser, ec);
  Reply reply;
  if (ec) return reply;
  reply.status = static_cast<int>(parser.get().result_int());
  reply.body = parser.get().body();
  for (const auto& f : parser.get())
    reply.headers[std::string(f.name_string())] = std::string(f.value());
  return reply;
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router_ = std::make_unique<Router>("secret", metrics_);
    router_->add(
        "GET", "/health",
        [](HttpRequest, ResponderPtr r) {
          r->send(HttpResponse{200, "text/plain", "ok", {}});
        },
        /*authenticated=*/false);
    router_->add("POST", "/v1/echo", [](HttpRequest req, ResponderPtr r) {
      r->send(HttpResponse{200, "application/json", req.body, {}});
    });
    router_->add("POST", "/v1/messages", [](HttpRequest, ResponderPtr r) {
      r->send(HttpResponse{200, "application/json", "{}", {}});
    });
    router_->add("POST", "/v1/stream", [this](HttpRequest, ResponderPtr r) {
      producers_.emplace_back([r] {
        r->open_stream(200, "text/event-stream");
        for (int i = 0; i < 5; ++i) r->write("data: " + std::to_string(i) + "\n\n");
        r->close();
      });
    });
    router_->set_ready(true);
    HttpServerOptions options;
    options.port = 0;
    options.max_body_bytes = 1024;
    server_ = std::make_unique<HttpServer>(options, [this](HttpRequest q, ResponderPtr r) {
      router_->handle(std::move(q), std::move(r));
    });
    ASSERT_TRUE(server_->start().ok());
  }
  void TearDown() override {
    for (auto& t : producers_) t.join();
    server_->stop(100);
    server_->wait();
  }
  const std::vector<std::pair<std::string, std::string>> auth_ = {
      {"authorization", "Bearer secret"}};
  Metrics metrics_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<HttpServer> server_;
  std::vector<std::thread> producers_;
};

TEST_F(ServerTest, HealthNeedsNoKey) {
  auto r = request(server_->port(), http::verb::get, "/health", "");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
}

TEST_F(ServerTest, BearerAndXApiKeyAreAccepted) {
  EXPECT_EQ(request(server_->port(), http::verb::post, "/v1/echo", "{\"a\":1}", auth_).body,
            "{\"a\":1}");
  EXPECT_EQ(
      request(server_->port(), http::verb::post, "/v1/echo", "x", {{"x-api-key", "secret"}}).status,
      200);
  auto bad = request(server_->port(), http::verb::post, "/v1/echo", "x",
                     {{"authorization", "Bearer nope"}});
  EXPECT_EQ(bad.status, 401);
  EXPECT_NE(bad.body.find("\"type\":\"authentication_error\""), std::string::npos);
}

TEST_F(ServerTest, AnthropicPathsGetAnthropicErrorShape) {
  auto r = request(server_->port(), http::verb::post, "/v1/messages", "{}");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body.rfind(R"({"type":"error","error":{"type":"authentication_error")", 0), 0u)
      << r.body;
}

TEST_F(ServerTest, UnknownPathAndWrongMethod) {
  EXPECT_EQ(request(server_->port(), http::verb::get, "/nope", "", auth_).status, 404);
  EXPECT_EQ(request(server_->port(), http::verb::get, "/v1/echo", "", auth_).status, 405);
}

TEST_F(ServerTest, OversizedBodyIs413) {
  auto r = request(server_->port(), http::verb::post, "/v1/echo", std::string(4096, 'x'), auth_);
  EXPECT_EQ(r.status, 413);
}

TEST_F(ServerTest, StreamsChunksWrittenFromAnotherThread) {
  auto r = request(server_->port(), http::verb::post, "/v1/stream", "", auth_);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n");
  EXPECT_EQ(r.header("Content-Type"), "text/event-stream");
}

TEST_F(ServerTest, NotReadyIs503WithRetryAfter) {
  router_->set_ready(false);
  auto r = request(server_->port(), http::verb::post, "/v1/echo", "{}", auth_);
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.header("Retry-After"), "1");
}

// Work posted to the exchange's strand: its writes take the direct-send path whenever the
// writer idles, a large one overflows the socket buffer (a partial send the writer finishes),
// and the handler runs on a handler thread. Every byte arrives in order, and the transport
// reports every stamped token once, with at least the wait it had before the write.
TEST(HttpServerStreaming, PostedWritesArriveInOrderAndReportTheirTokens) {
  struct Work : PostedWork {
    std::function<void()> fn;
    void run() override { fn(); }
  };
  std::mutex mu;
  int reported_tokens = 0;
  double min_delay = 1e9;
  HttpServerOptions options;
  options.port = 0;
  options.handler_threads = 2;
  int first_writes = 0;  // writes carrying the stream's first token (with any coalesced after it)
  double worst_sum_error = 0, min_hold = 1e9, min_handoff = 1e9, min_queue = 1e9;
  double min_process = 1e9, min_send = 1e9;
  options.on_token_delay = [&](const TokenDelay& d) {
    std::lock_guard lock(mu);
    reported_tokens += d.tokens;
    first_writes += d.first ? 1 : 0;
    min_delay = std::min(min_delay, d.total);
    min_hold = std::min(min_hold, d.hold);
    min_handoff = std::min(min_handoff, d.handoff);
    min_queue = std::min(min_queue, d.queue);
    min_process = std::min(min_process, d.process);
    min_send = std::min(min_send, d.send);
    worst_sum_error = std::max(worst_sum_error, std::abs(d.hold + d.server() - d.total));
  };
  std::string expected;
  std::vector<std::string> pieces;
  for (int i = 0; i < 41; ++i)
    pieces.push_back(i == 20 ? "data: " + std::string(4 << 20, 'x') + "\n\n"
                             : "data: " + std::to_string(i) + "\n\n");
  for (const auto& p : pieces) expected += p;
  std::thread producer;
  HttpServer server(options, [&pieces, &producer](HttpRequest, ResponderPtr r) {
    r->open_stream(200, "text/event-stream");
    producer = std::thread([r, &pieces] {  // spaced out, so that the writer idles in between
      for (const auto& piece : pieces) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        auto w = std::make_shared<Work>();
        w->fn = [r, &piece, &pieces] {
          // Produced 5 ms ago, then 1 ms each held back, handed over, queued and processed.
          const auto now = std::chrono::steady_clock::now();
          const auto ms = [now](int k) { return now - std::chrono::milliseconds(k); };
          TokenStamp stamp;
          stamp.produced = ms(5);
          stamp.released = ms(4);
          stamp.queued = ms(3);
          stamp.picked = ms(2);
          stamp.issued = ms(1);
          stamp.tokens = 1;
          stamp.first = &piece == &pieces.front();
          r->write_stamped(piece, stamp);
        };
        r->post(w);
      }
      auto last = std::make_shared<Work>();
      last->fn = [r] { r->close(); };
      r->post(last);
    });
  });
  ASSERT_TRUE(server.start().ok());
  auto reply = request(server.port(), http::verb::post, "/v1/stream", "");
  EXPECT_EQ(reply.status, 200);
  EXPECT_TRUE(reply.body == expected) << reply.body.size() << " vs " << expected.size();
  producer.join();
  server.stop(100);
  server.wait();
  std::lock_guard lock(mu);
  EXPECT_EQ(reported_tokens, 41);
  EXPECT_EQ(first_writes, 1);
  EXPECT_GE(min_delay, 0.005);
  // The parts add up to the wait, each at least the time stamped for it.
  EXPECT_LT(worst_sum_error, 1e-9);
  EXPECT_GE(min_hold, 0.001);
  EXPECT_GE(min_handoff, 0.001);
  EXPECT_GE(min_queue, 0.001);
  EXPECT_GE(min_process, 0.001);
  EXPECT_GE(min_send, 0.001);
}

// /metrics counts the server's own delay (without a held-back token's wait for the engine),
// the stream's first token apart from the later ones.
TEST(HttpServerStreaming, TokenDelayMetricSplitsByPhaseAndLeavesOutTheHold) {
  Metrics metrics;
  TokenDelay first;
  first.queue = 0.0004;
  first.tokens = 1;
  first.first = true;
  TokenDelay held;  // 30 ms for the engine's next token, then 0.3 ms in the server
  held.hold = 0.03;
  held.queue = 0.0002;
  held.send = 0.0001;
  held.tokens = 2;
  metrics.observe_token_delay(first);
  metrics.observe_token_delay(held);
  const std::string text = metrics.render();
  const std::string name = "deepinfer_stream_token_delay_seconds";
  EXPECT_NE(text.find(name + "_bucket{phase=\"first\",le=\"0.0005\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find(name + "_count{phase=\"first\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find(name + "_bucket{phase=\"later\",le=\"0.0005\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find(name + "_bucket{phase=\"later\",le=\"0.00025\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find(name + "_count{phase=\"later\"} 2\n"), std::string::npos);
  EXPECT_EQ(text.find("# TYPE " + name), text.rfind("# TYPE " + name));  // one family
}

}  // namespace
}  // namespace deepinfer::server
