#include "server/http_server.h"

#include <array>
#include <boost/asio.hpp>
#include <boost/asio/experimental/as_tuple.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace deepinfer::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
constexpr auto kNoThrow = asio::experimental::as_tuple(asio::use_awaitable);

// What a handler asked for, queued until the session coroutine writes it. Stream bytes are
// not ops: they gather in one buffer (see SessionResponder::write).
struct Op {
  enum class Kind { Send, Open, Close } kind;
  HttpResponse response;  // Send; Open uses status/content_type/headers
};

// Each I/O thread runs its own io_context and owns the connections it accepted, so that
// everything of one exchange runs on one thread without a strand.
using Executor = asio::io_context::executor_type;

// Work posted to the exchanges of one I/O thread (Responder::post), run in order on that thread.
// The engine thread hands each step's events to up to a thousand exchanges: the thread is woken
// once for everything queued until it drains, not once per event (no allocation per post
// either: the two queues swap and keep their capacity).
class Mailbox {
 public:
  explicit Mailbox(asio::io_context& ioc) : ioc_(ioc) {}
  void push(std::shared_ptr<PostedWork> work) {
    bool wake;
    {
      std::lock_guard lock(mu_);
      queued_.push_back(std::move(work));
      wake = !scheduled_;
      scheduled_ = true;
    }
    if (wake) asio::post(ioc_, [this] { drain(); });
  }

 private:
  // One batch per handler, so that the thread's socket work interleaves with long bursts.
  void drain() {
    {
      std::lock_guard lock(mu_);
      running_.swap(queued_);
    }
    for (auto& work : running_) work->run();
    running_.clear();
    bool again;
    {
      std::lock_guard lock(mu_);
      again = !queued_.empty();
      scheduled_ = again;
    }
    if (again) asio::post(ioc_, [this] { drain(); });
  }

  asio::io_context& ioc_;
  std::mutex mu_;
  std::vector<std::shared_ptr<PostedWork>> queued_, running_;
  bool scheduled_ = false;
};

// One I/O thread's loop: its io_context, kept running while idle, and its mailbox.
struct IoLoop {
  explicit IoLoop(int i) : index(i) {}
  int index;
  asio::io_context ioc{1};
  asio::executor_work_guard<Executor> keep_running = asio::make_work_guard(ioc);
  Mailbox mailbox{ioc};
};

class SessionResponder final : public Responder,
                               public std::enable_shared_from_this<SessionResponder> {
 public:
  using DelaySink = std::function<void(const TokenDelay&)>;
  SessionResponder(IoLoop& loop, const DelaySink* on_delay)
      : executor_(loop.ioc.get_executor()),
        mailbox_(loop.mailbox),
        loop_index_(loop.index),
        wake_(executor_, std::chrono::steady_clock::time_point::max()),
        on_delay_(on_delay && *on_delay ? on_delay : nullptr) {}

  void send(HttpResponse response) override { push(Op{Op::Kind::Send, std::move(response)}); }
  void open_stream(int status, std::string content_type, Headers headers) override {
    HttpResponse r;
    r.status = status;
    r.content_type = std::move(content_type);
    r.headers = std::move(headers);
    push(Op{Op::Kind::Open, std::move(r)});
  }
  // On the I/O thread, while the writer idles on an open stream: one non-blocking send. Otherwise
  // appends to the pending bytes (their buffer and the writer's swap, so a steady stream
  // allocates nothing) and wakes the writer unless a wake-up is already on its way.
  void write(std::string_view chunk) override { write_stamped(chunk, {}); }
  void write_stamped(std::string_view chunk, const TokenStamp& stamp) override {
    if (chunk.empty()) return;
    if (direct_socket_ && executor_.running_in_this_thread() && nothing_queued()) {
      // unsent_ is empty while direct sends are allowed: a tail left now is this chunk's.
      if (send_direct(chunk)) {
        if (unsent_.empty())
          report(stamp);
        else
          unsent_stamp_.merge(stamp);
        return;
      }
    }
    {
      std::lock_guard lock(mu_);
      bytes_.append(chunk);
      bytes_stamp_.merge(stamp);
    }
    wake();
  }
  void close() override { push(Op{Op::Kind::Close, {}}); }
  void post(std::shared_ptr<PostedWork> work) override { mailbox_.push(std::move(work)); }
  int loop_index() const override { return loop_index_; }
  void on_disconnect(std::function<void()> callback) override {
    {
      std::lock_guard lock(mu_);
      if (!disconnected_) {
        on_disconnect_ = std::move(callback);
        return;
      }
    }
    if (callback) callback();  // the client left before the handler registered
  }
  bool disconnected() const override { return disconnected_.load(); }

  // Session side (runs on the I/O thread): everything asked for since the last take. `unsent` is
  // the tail of a chunk a direct send could not finish: it goes out first, as it is.
  bool take(std::vector<Op>& ops, std::string& bytes, TokenStamp& bytes_stamp, std::string& unsent,
            TokenStamp& unsent_stamp) {
    unsent.swap(unsent_);
    unsent_stamp = std::exchange(unsent_stamp_, {});
    std::lock_guard lock(mu_);
    ops.swap(ops_);
    bytes.swap(bytes_);
    bytes_stamp = std::exchange(bytes_stamp_, {});
    return !ops.empty() || !bytes.empty() || !unsent.empty();
  }
  // The socket took the bytes of these tokens.
  void report(const TokenStamp& stamp) const {
    if (!on_delay_ || stamp.tokens == 0) return;
    (*on_delay_)(TokenDelay::of(stamp, std::chrono::steady_clock::now()));
  }
  // While the writer waits with nothing in flight on an open stream, chunks written on the
  // I/O thread go straight to the socket (one non-blocking send, no wake-up of the writer).
  void allow_direct(tcp::socket* socket) { direct_socket_ = socket; }
  asio::steady_timer& wake_timer() { return wake_; }
  void mark_disconnected() {
    std::function<void()> callback;
    {
      std::lock_guard lock(mu_);
      if (disconnected_.exchange(true)) return;
      callback = std::move(on_disconnect_);
    }
    if (callback) callback();
  }

 private:
  bool nothing_queued() {
    std::lock_guard lock(mu_);
    return ops_.empty() && bytes_.empty();
  }
  // Sends one HTTP chunk without blocking. False: nothing was sent (the caller queues the chunk
  // as usual); a partial send keeps the rest for the writer, which is woken for it.
  bool send_direct(std::string_view chunk) {
    char head[20];
    const int head_len = std::snprintf(head, sizeof head, "%zx\r\n", chunk.size());
    const std::array<asio::const_buffer, 3> parts{asio::buffer(head, static_cast<size_t>(head_len)),
                                                  asio::buffer(chunk), asio::buffer("\r\n", 2)};
    const size_t total = static_cast<size_t>(head_len) + chunk.size() + 2;
    beast::error_code ec;
    const size_t sent = direct_socket_->write_some(parts, ec);
    if (sent == 0) {
      direct_socket_ = nullptr;  // the writer takes over (and sees the error, if any)
      return false;
    }
    if (sent < total) {
      size_t skip = sent;
      for (const auto& b : parts) {
        const size_t k = std::min(skip, b.size());
        unsent_.append(static_cast<const char*>(b.data()) + k, b.size() - k);
        skip -= k;
      }
      direct_socket_ = nullptr;
      wake_.cancel();
    }
    return true;
  }

  void push(Op op) {
    {
      std::lock_guard lock(mu_);
      ops_.push_back(std::move(op));
    }
    wake();
  }
  // The writer waits on the I/O thread right after an empty take(), so a cancel made on that
  // thread (directly, or posted to it after new work was queued) can never be lost. One posted
  // wake-up in flight is enough: it runs after everything queued before it, and any work queued
  // after it was cleared posts anew.
  void wake() {
    if (executor_.running_in_this_thread()) {  // posted work of this exchange: no hop needed
      wake_.cancel();
      return;
    }
    if (wake_pending_.exchange(true)) return;
    asio::post(executor_, [self = shared_from_this()] {
      self->wake_pending_.store(false);
      self->wake_.cancel();
    });
  }

  Executor executor_;
  Mailbox& mailbox_;
  int loop_index_;
  asio::steady_timer wake_;
  std::mutex mu_;
  std::vector<Op> ops_;
  std::string bytes_;
  TokenStamp bytes_stamp_;
  const DelaySink* on_delay_;
  std::string unsent_;  // I/O thread only
  TokenStamp unsent_stamp_;
  tcp::socket* direct_socket_ = nullptr;  // I/O thread only: set while the writer idles
  std::atomic<bool> wake_pending_{false};
  std::function<void()> on_disconnect_;
  std::atomic<bool> disconnected_{false};
};

http::response<http::string_body> to_beast(HttpResponse&& r, unsigned version, bool keep_alive) {
  http::response<http::string_body> res{static_cast<http::status>(r.status), version};
  res.set(http::field::server, "deepinfer");
  res.set(http::field::content_type, r.content_type);
  for (auto& [k, v] : r.headers) res.set(k, v);
  res.keep_alive(keep_alive);
  res.body() = std::move(r.body);
  res.prepare_payload();
  return res;
}

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  Handler handler;
  std::vector<std::unique_ptr<IoLoop>> loops;  // loops[0] also accepts
  size_t next_loop = 0;                        // round-robin owner of the next connection
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  std::optional<asio::thread_pool> handler_pool;
  std::atomic<bool> stopping{false};
  std::atomic<int> open_exchanges{0};
  uint16_t bound_port = 0;
  std::mutex done_mu;
  std::condition_variable done_cv;
  bool done = false;

  asio::awaitable<void> accept_loop() {
    for (;;) {
      IoLoop& loop = *loops[next_loop];
      next_loop = (next_loop + 1) % loops.size();
      auto [ec, socket] = co_await acceptor->async_accept(loop.ioc, kNoThrow);
      if (ec) {
        if (stopping) co_return;
        continue;
      }
      // SSE frames are small and latency-bound: no Nagle delay behind an unacknowledged frame.
      beast::error_code nodelay_ec;
      socket.set_option(tcp::no_delay(true), nodelay_ec);
      // Direct sends from the I/O thread must never block (asynchronous operations are
      // unaffected).
      socket.non_blocking(true, nodelay_ec);
      asio::co_spawn(loop.ioc, session(beast::tcp_stream(std::move(socket)), loop), asio::detached);
    }
  }

  asio::awaitable<void> session(beast::tcp_stream stream, IoLoop& loop) {
    beast::flat_buffer buffer;
    for (;;) {
      stream.expires_after(std::chrono::seconds(options.idle_timeout_s));
      http::request_parser<http::string_body> parser;
      parser.body_limit(options.max_body_bytes);
      parser.header_limit(64 * 1024);
      auto [ec, n] = co_await http::async_read(stream, buffer, parser, kNoThrow);
      (void)n;
      if (ec == http::error::body_limit) {
        HttpResponse r{
            413,
            "application/json",
            R"({"error":{"message":"Request body too large","type":"invalid_request_error","param":null,"code":"request_too_large"}})",
            {}};
        auto res = to_beast(std::move(r), 11, false);
        co_await http::async_write(stream, res, kNoThrow);
        co_return;
      }
      if (ec) {
        if (ec != http::error::end_of_stream && ec != asio::error::operation_aborted &&
            ec != beast::error::timeout && !stopping) {
          HttpResponse r{
              400,
              "application/json",
              R"({"error":{"message":"Malformed HTTP request","type":"invalid_request_error","param":null,"code":"invalid_request_error"}})",
              {}};
          auto res = to_beast(std::move(r), 11, false);
          co_await http::async_write(stream, res, kNoThrow);
        }
        co_return;
      }
      auto& req = parser.get();
      const bool keep_alive = req.keep_alive() && !stopping;
      const unsigned version = req.version();
      HttpRequest request;
      request.method = std::string(req.method_string());
      request.target = std::string(req.target());
      for (const auto& field : req) {
        std::string name(field.name_string());
        for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        request.headers.emplace_back(std::move(name), std::string(field.value()));
      }
      request.body = std::move(req.body());

      auto responder = std::make_shared<SessionResponder>(loop, &options.on_token_delay);
      ++open_exchanges;
      if (handler_pool) {
        asio::post(*handler_pool, [this, request = std::move(request), responder]() mutable {
          handler(std::move(request), responder);
        });
      } else {
        handler(std::move(request), responder);
      }
      stream.expires_never();
      auto watching = watch_disconnect(stream.socket(), responder);
      const bool reuse = co_await drain(stream, *responder, version, keep_alive);
      *watching = false;
      beast::error_code cancel_ec;
      stream.socket().cancel(cancel_ec);
      --open_exchanges;
      if (!reuse) {
        beast::error_code ignored;
        stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
        co_return;
      }
    }
  }

  // While an exchange is answered nothing more is read, so a client that goes away mid-stream is
  // noticed by waiting for the socket to become readable: end of stream or an error (and no
  // pipelined bytes) marks the exchange disconnected at once, not at the next failed write.
  // The returned flag is cleared (on the I/O thread) before the socket may go away.
  static std::shared_ptr<bool> watch_disconnect(tcp::socket& socket,
                                                std::shared_ptr<SessionResponder> responder) {
    auto watching = std::make_shared<bool>(true);
    socket.async_wait(tcp::socket::wait_read, [watching, &socket, responder](beast::error_code ec) {
      if (!*watching) return;
      *watching = false;
      beast::error_code avail_ec;
      if (ec || socket.available(avail_ec) == 0 || avail_ec) responder->mark_disconnected();
    });
    return watching;
  }

  // Writes what the handler produces until the exchange is complete. Returns whether the
  // connection may serve another request. The stream bytes gathered since the last write go
  // out as one chunk; an Open always comes before a stream's bytes and a Close after them.
  asio::awaitable<bool> drain(beast::tcp_stream& stream, SessionResponder& responder,
                              unsigned version, bool keep_alive) {
    std::vector<Op> ops;
    std::string bytes, unsent;
    TokenStamp bytes_stamp, unsent_stamp;
    bool streaming = false;
    for (;;) {
      if (!responder.take(ops, bytes, bytes_stamp, unsent, unsent_stamp)) {
        responder.wake_timer().expires_at(std::chrono::steady_clock::time_point::max());
        if (streaming) responder.allow_direct(&stream.socket());
        co_await responder.wake_timer().async_wait(kNoThrow);
        responder.allow_direct(nullptr);
        continue;
      }
      beast::error_code ec;
      if (!unsent.empty()) {
        std::tie(ec, std::ignore) =
            co_await asio::async_write(stream.socket(), asio::buffer(unsent), kNoThrow);
        if (!ec) responder.report(unsent_stamp);
        unsent.clear();
      }
      size_t i = 0;
      for (; !ec && i < ops.size() && ops[i].kind != Op::Kind::Close; ++i) {
        Op& op = ops[i];
        if (op.kind == Op::Kind::Send) {
          if (streaming) continue;
          auto res = to_beast(std::move(op.response), version, keep_alive);
          std::tie(ec, std::ignore) = co_await http::async_write(stream, res, kNoThrow);
          if (ec) responder.mark_disconnected();
          co_return !ec && keep_alive;
        }
        http::response<http::empty_body> res{static_cast<http::status>(op.response.status),
                                             version};
        res.set(http::field::server, "deepinfer");
        res.set(http::field::content_type, op.response.content_type);
        res.set(http::field::cache_control, "no-cache");
        for (auto& [k, v] : op.response.headers) res.set(k, v);
        res.chunked(true);
        res.keep_alive(keep_alive);
        http::response_serializer<http::empty_body> sr{res};
        std::tie(ec, std::ignore) = co_await http::async_write_header(stream, sr, kNoThrow);
        streaming = true;
        if (ec) break;
      }
      // Chunks go straight to the socket: the stream has no deadline while it is answered, and
      // beast's timed stream would allocate its operation state on every write.
      if (!ec && streaming && !bytes.empty()) {
        std::tie(ec, std::ignore) = co_await asio::async_write(
            stream.socket(), http::make_chunk(asio::buffer(bytes)), kNoThrow);
        if (!ec) responder.report(bytes_stamp);
      }
      bytes.clear();
      if (!ec && i < ops.size()) {  // Close
        if (streaming)
          std::tie(ec, std::ignore) =
              co_await asio::async_write(stream.socket(), http::make_chunk_last(), kNoThrow);
        co_return !ec && keep_alive && streaming;
      }
      if (ec) {
        responder.mark_disconnected();
        co_return false;
      }
      ops.clear();
    }
  }
};

HttpServer::HttpServer(HttpServerOptions options, Handler handler)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->handler = std::move(handler);
}

HttpServer::~HttpServer() {
  stop(0);
  wait();
}

Status HttpServer::start() {
  beast::error_code ec;
  auto address = asio::ip::make_address(impl_->options.host, ec);
  if (ec) return Error{"invalid --host '" + impl_->options.host + "': " + ec.message()};
  tcp::endpoint endpoint{address, impl_->options.port};
  for (int i = 0; i < std::max(1, impl_->options.io_threads); ++i)
    impl_->loops.push_back(std::make_unique<IoLoop>(i));
  auto& acceptor = impl_->acceptor.emplace(impl_->loops[0]->ioc);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(4096, ec);
  if (ec) {
    return Error{"cannot listen on " + impl_->options.host + ":" +
                 std::to_string(impl_->options.port) + ": " + ec.message()};
  }
  impl_->bound_port = acceptor.local_endpoint().port();
  if (impl_->options.handler_threads > 0)
    impl_->handler_pool.emplace(static_cast<size_t>(impl_->options.handler_threads));
  asio::co_spawn(impl_->loops[0]->ioc, impl_->accept_loop(), asio::detached);
  for (auto& loop : impl_->loops) impl_->threads.emplace_back([&ioc = loop->ioc] { ioc.run(); });
  return Status::Ok();
}

uint16_t HttpServer::port() const { return impl_->bound_port; }

void HttpServer::stop(int grace_ms) {
  if (impl_->stopping.exchange(true)) return;
  if (impl_->loops.empty()) return;  // never started
  asio::post(impl_->loops[0]->ioc, [this] {
    beast::error_code ignored;
    if (impl_->acceptor) impl_->acceptor->close(ignored);
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  while (impl_->open_exchanges > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  for (auto& loop : impl_->loops) loop->ioc.stop();
}

void HttpServer::wait() {
  for (auto& t : impl_->threads)
    if (t.joinable()) t.join();
  impl_->threads.clear();
  if (impl_->handler_pool) impl_->handler_pool->join();
}

}  // namespace deepinfer::server
