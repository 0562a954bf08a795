// Routing, auth and the server-wide gates in front of the API handlers: API key (Bearer or
// x-api-key), 503 while loading, 404/405 in the API's error shape, request counting. Handlers
// are plain functions of (HttpRequest, Responder) and know nothing of the transport.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "server/http_types.h"
#include "server/metrics.h"

namespace deepinfer::server {

class Router {
 public:
  Router(std::string api_key, Metrics& metrics);

  // `authenticated` routes require the API key when one is set.
  void add(std::string method, std::string path, Handler handler, bool authenticated = true);
  void set_ready(bool ready) { ready_ = ready; }

  void handle(HttpRequest request, ResponderPtr responder) const;

 private:
  struct Route {
    std::string method;
    std::string path;
    Handler handler;
    bool authenticated;
  };
  bool authorized(const HttpRequest& request) const;

  std::string api_key_;
  Metrics& metrics_;
  std::vector<Route> routes_;
  std::atomic<bool> ready_{false};
};

}  // namespace deepinfer::server
