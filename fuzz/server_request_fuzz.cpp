// Fuzzes the request path: the first byte picks the endpoint (low 3 bits) and whether the
// client disconnects at once (bit 3); the rest is the HTTP body. The body goes through the
// Router and ApiService to a real engine over a scripted model, answered into an in-memory
// responder. Every exchange must complete with a JSON error or a 200, never crash or hang.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "../tests/server/service_harness.h"
#include "common/json.h"

namespace {

deepinfer::server::testing::ServiceHarness& harness() {
  static auto* h = [] {
    deepinfer::server::testing::HarnessOptions o;
    o.source_dir = DEEPINFER_SOURCE_DIR;  // the fixtures and tokenizer of this checkout
    o.max_model_len = 256;
    o.max_concurrent = 8;
    return new deepinfer::server::testing::ServiceHarness(o);
  }();
  return *h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer::server;
  if (size == 0) return 0;
  auto& h = harness();
  if (!h.ok()) __builtin_trap();
  static constexpr std::pair<const char*, const char*> kRoutes[] = {
      {"POST", "/v1/chat/completions"}, {"POST", "/v1/responses"}, {"POST", "/v1/messages"},
      {"POST", "/v1/completions"},      {"GET", "/v1/models"},     {"GET", "/metrics"},
      {"POST", "/v1/chat/completions"}, {"GET", "/health"}};
  const auto [method, path] = kRoutes[data[0] & 7];
  const bool disconnect = (data[0] & 8) != 0;
  std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  auto responder = h.start(method, path, std::move(body));
  if (disconnect) responder->disconnect();
  if (!responder->wait(std::chrono::milliseconds(20000))) __builtin_trap();  // a hung exchange
  const HttpResponse r = responder->reply();
  if (r.status < 200 || r.status > 599) __builtin_trap();
  if (r.status != 200) {
    // Errors are JSON objects in the API's shape.
    auto v = deepinfer::parse_json(r.body);
    if (!v.ok() || !v.value().is_object()) __builtin_trap();
  }
  return 0;
}
