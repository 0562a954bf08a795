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

namespace deepinfer::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value, uint64_t times = 1);
  void render(std::string& out, const std::string& name, const std::string& help) const;

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
  // Per streamed token: engine event → its SSE bytes taken by the socket (the server's delay).
  Histogram stream_token_delay_seconds;

  // Extra gauges (engine state) sampled at scrape time.
  void set_gauge_source(std::function<std::vector<Gauge>()> source);
  std::string render() const;

 private:
  std::function<std::vector<Gauge>()> gauge_source_;
};

}  // namespace deepinfer::server
