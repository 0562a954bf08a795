#include "server/router.h"

#include "server/api_errors.h"

namespace deepinfer::server {

Router::Router(std::string api_key, Metrics& metrics) : api_key_(std::move(api_key)), metrics_(metrics) {}

void Router::add(std::string method, std::string path, Handler handler, bool authenticated) {
  routes_.push_back(Route{std::move(method), std::move(path), std::move(handler), authenticated});
}

bool Router::authorized(const HttpRequest& request) const {
  if (api_key_.empty()) return true;
  if (request.header("x-api-key") == api_key_) return true;
  std::string_view auth = request.header("authorization");
  constexpr std::string_view kBearer = "Bearer ";
  return auth.size() > kBearer.size() && auth.substr(0, kBearer.size()) == kBearer &&
         auth.substr(kBearer.size()) == api_key_;
}

void Router::handle(HttpRequest request, ResponderPtr responder) const {
  const std::string path(request.path());
  const ApiFlavor flavor = flavor_for_path(path);
  const Route* match = nullptr;
  bool path_known = false;
  for (const auto& route : routes_) {
    if (route.path != path) continue;
    path_known = true;
    if (route.method == request.method) match = &route;
  }
  if (!match) {
    if (path_known) {
      responder->send(api_error(flavor, 405, "Method " + request.method + " is not allowed for " + path));
    } else {
      responder->send(api_error(flavor, 404, "Not found: " + request.method + " " + path));
    }
    return;
  }
  if (match->authenticated) {
    ++metrics_.requests_total;
    if (!authorized(request)) {
      ++metrics_.requests_failed;
      responder->send(api_error(flavor, 401, "Invalid or missing API key"));
      return;
    }
  }
  // Everything but /metrics waits for the model (so /health turns 200 once requests can run).
  if (!ready_ && path != "/metrics") {
    if (match->authenticated) ++metrics_.requests_rejected;
    auto r = api_error(flavor, 503, "The model is loading; retry shortly");
    r.headers.emplace_back("Retry-After", "1");
    responder->send(std::move(r));
    return;
  }
  match->handler(std::move(request), std::move(responder));
}

}  // namespace deepinfer::server
