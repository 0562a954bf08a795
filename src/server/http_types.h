// HTTP values passed between the Beast transport (http_server.cpp) and the handlers, so that
// routing, auth and the API handlers never see Beast types and can be unit-tested directly.
#pragma once

#include <algorithm>
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

// The tokens a stream write carries and the path of the oldest of them through the server, so
// that the transport can report how long they waited after the engine produced them, and where.
// A write that carries several tokens reports each with the oldest one's wait (an upper bound).
// A token whose text the output parser or the detokenizer held back (`</think>`, which has no
// bytes of its own in the Chat shape; a possible tag prefix; an incomplete UTF-8 sequence) can
// leave only with a later token: until the engine produces that one it waits on the engine,
// not on the server ("hold"); from then on its wait is the server's again.
struct TokenStamp {
  using Clock = std::chrono::steady_clock;
  Clock::time_point produced{};  // the engine began handing its step's events over
  Clock::time_point released{};  // the same for the engine's next event after a hold
  Clock::time_point queued{};    // that event reached the session's inbox
  Clock::time_point picked{};    // the pass that wrote its text began
  Clock::time_point issued{};    // its bytes were handed to the transport
  int tokens = 0;
  bool first = false;  // carries the stream's first token
  void merge(const TokenStamp& o) {
    if (o.tokens == 0) return;
    const int total = tokens + o.tokens;
    const bool any_first = first || o.first;
    if (tokens == 0 || o.produced < produced) *this = o;
    tokens = total;
    first = any_first;
  }
};

// What the transport reports once the socket has taken a stamped write's bytes: the oldest
// token's wait (seconds) and its parts, which add up to it. Parts that were not stamped are 0.
// The server's own delay is total − hold = handoff + queue + process + send.
struct TokenDelay {
  double total = 0;
  double hold = 0;     // waiting for the engine's next event (see TokenStamp)
  double handoff = 0;  // the engine thread ran the callbacks of the step's earlier events
  double queue = 0;    // in the session's inbox → its executor began the pass
  double process = 0;  // detokenizing, output parsing, event encoding
  double send = 0;  // handed to the transport → taken by the socket (a write in flight, EAGAIN)
  int tokens = 0;
  bool first = false;  // the write carries the stream's first token

  double server() const { return handoff + queue + process + send; }

  static TokenDelay of(const TokenStamp& s, TokenStamp::Clock::time_point now) {
    // Unset points count as the previous one, so that their parts are 0.
    const auto released = std::max(s.released, s.produced);
    const auto queued = std::max(s.queued, released);
    const auto picked = std::max(s.picked, queued);
    const auto issued = std::max(s.issued, picked);
    const auto sec = [](auto d) { return std::chrono::duration<double>(d).count(); };
    TokenDelay d;
    d.hold = sec(released - s.produced);
    d.handoff = sec(queued - released);
    d.queue = sec(picked - queued);
    d.process = sec(issued - picked);
    d.send = sec(std::max(now, issued) - issued);
    d.total = d.hold + d.handoff + d.queue + d.process + d.send;
    d.tokens = s.tokens;
    d.first = s.first;
    return d;
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
  // The I/O thread the exchange runs on (0, 1, ...), whose posted work runs in order with that of
  // every other exchange of the thread; -1 when there is none (in-memory responders).
  virtual int loop_index() const { return -1; }
  virtual void on_disconnect(std::function<void()> callback) = 0;
  virtual bool disconnected() const = 0;
};

using ResponderPtr = std::shared_ptr<Responder>;
using Handler = std::function<void(HttpRequest request, ResponderPtr responder)>;

}  // namespace deepinfer::server
