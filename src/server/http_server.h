// The HTTP/1.1 transport: Boost.Beast with C++20 coroutines on a small pool of I/O threads, each
// with its own io_context and the connections it accepted (one exchange, one thread).
// It parses requests (body limit), hands them to one Handler with a Responder, and writes the
// replies and SSE streams the handler produces. It knows nothing of the APIs behind it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/result.h"
#include "server/http_types.h"

namespace deepinfer::server {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;  // 0: pick a free port (see HttpServer::port())
  int io_threads = 1;
  // Threads that run the handler for each parsed request (JSON, prompt rendering, tokenizing),
  // so that a burst of new requests does not hold up the I/O threads' streaming; 0 runs the
  // handler on the connection's I/O thread.
  int handler_threads = 0;
  size_t max_body_bytes = 32u << 20;
  int idle_timeout_s = 300;
  // Called (on an I/O thread) when the socket has taken the bytes of a stamped stream write:
  // how long its oldest token waited since the engine produced it, split by part (TokenDelay).
  std::function<void(const TokenDelay&)> on_token_delay;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens; returns once the socket accepts connections.
  Status start();
  uint16_t port() const;
  // Stops accepting; open exchanges finish within `grace_ms`, then everything closes.
  void stop(int grace_ms = 2000);
  // Blocks until stop() has completed.
  void wait();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer::server
