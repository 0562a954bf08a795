// Server metrics in the Prometheus text format (no client library is packaged): request and
// token counters, TTFT / TPOT / end-to-end latency histograms, plus gauges read at scrape time
// (KV usage, prefix hit rate, queue length) from a callback the server wires to the engine.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "server/http_types.h"

namespace deepinfer::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value, uint64_t times = 1);
  void render(std::string& out, const std::string& name, const std::string& help) const;
  // One labelled series of a family whose HELP / TYPE lines were written already, e.g.
  // labels = "phase=\"first\"".
  void render_series(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket (non-cumulative); last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct Gauge {
  std::string name;
  std::string help;
  double value = 0;
};

class Metrics {
 public:
  Metrics();
  std::atomic<uint64_t> requests_total{0};
  std::atomic<uint64_t> requests_failed{0};
  std::atomic<uint64_t> requests_rejected{0};  // 429 / 503
  std::atomic<uint64_t> prompt_tokens_total{0};
  std::atomic<uint64_t> completion_tokens_total{0};
  std::atomic<int64_t> requests_running{0};
  Histogram ttft_seconds;
  Histogram tpot_seconds;
  Histogram e2e_seconds;
  // Per streamed token: the server's own delay (TokenDelay::server(): engine event → its SSE
  // bytes taken by the socket, less a held-back token's wait for the engine's next one), the
  // stream's first token apart from the later ones (label phase="first" / "later").
  Histogram stream_first_token_delay_seconds;
  Histogram stream_later_token_delay_seconds;
  void observe_token_delay(const TokenDelay& delay);

  // Extra gauges (engine state) sampled at scrape time.
  void set_gauge_source(std::function<std::vector<Gauge>()> source);
  std::string render() const;

 private:
  std::function<std::vector<Gauge>()> gauge_source_;
};

}  // namespace deepinfer::server
