// HTTP values passed between the Beast transport (http_server.cpp) and the handlers, so that
// routing, auth and the API handlers never see Beast types and can be unit-tested directly.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deepinfer::server {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path + query
  Headers headers;     // names lower-cased
  std::string body;

  // Header value by lower-case name, "" when absent.
  std::string_view header(std::string_view lower_name) const {
    for (const auto& [k, v] : headers)
      if (k == lower_name) return v;
    return {};
  }
  std::string_view path() const {
    std::string_view t = target;
    return t.substr(0, t.find('?'));
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  Headers headers;  // extra headers (Retry-After, ...)
};

// One HTTP exchange seen from a handler: reply once with send(), or open_stream() and then
// write() body pieces and close(). Thread-safe: any thread may call these; the transport does
// the I/O on the connection's own executor. write() copies the bytes into the stream's pending
// buffer: pieces written while the previous write is in flight go out together in one chunk.
// post() runs work on the exchange's executor, one piece of work at a time (in order), so that
// a handler can do per-token work off the engine thread; an in-memory responder may run it at
// once. on_disconnect runs (once, on an I/O thread) when the client goes away before the
// exchange finished.
// Work a handler hands to Responder::post (kept alive until it has run or been dropped).
class PostedWork {
 public:
  virtual ~PostedWork() = default;
  virtual void run() = 0;
};

// The tokens a stream write carries and when the engine produced the oldest of them, so that the
// transport can report how long they waited before the socket took their bytes.
struct TokenStamp {
  std::chrono::steady_clock::time_point produced{};
  int tokens = 0;
  void merge(const TokenStamp& o) {
    if (o.tokens == 0) return;
    if (tokens == 0 || o.produced < produced) produced = o.produced;
    tokens += o.tokens;
  }
};

class Responder {
 public:
  virtual ~Responder() = default;
  virtual void send(HttpResponse response) = 0;
  virtual void open_stream(int status, std::string content_type, Headers headers = {}) = 0;
  virtual void write(std::string_view chunk) = 0;
  // write() of bytes that carry engine tokens (see TokenStamp).
  virtual void write_stamped(std::string_view chunk, const TokenStamp& stamp) {
    (void)stamp;
    write(chunk);
  }
  virtual void close() = 0;
  virtual void post(std::shared_ptr<PostedWork> work) = 0;
  virtual void on_disconnect(std::function<void()> callback) = 0;
  virtual bool disconnected() const = 0;
};

using ResponderPtr = std::shared_ptr<Responder>;
using Handler = std::function<void(HttpRequest request, ResponderPtr responder)>;

}  // namespace deepinfer::server
