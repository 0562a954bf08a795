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

// Observed from every I/O thread in the same burst (a token per stream per engine step), so the
// counts live in per-thread shards, each on its own cache line under its own lock: the threads do
// not queue on one lock. A scrape sums the shards.
inline constexpr size_t kMetricShards = 16;
size_t metric_shard();  // this thread's shard, assigned round-robin on first use

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value, uint64_t times = 1);
  void render(std::string& out, const std::string& name, const std::string& help) const;
  // One labelled series of a family whose HELP / TYPE lines were written already, e.g.
  // labels = "phase=\"first\"".
  void render_series(std::string& out, const std::string& name, const std::string& labels) const;

  static constexpr size_t kMaxBounds = 23;

 private:
  struct alignas(64) Shard {
    mutable std::mutex mu;
    std::array<uint64_t, kMaxBounds + 1> counts{};  // per bucket (non-cumulative); last = +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  std::vector<double> bounds_;
  std::array<Shard, kMetricShards> shards_;
};

// A counter bumped per streamed token from every I/O thread: per-thread shards as above.
class ShardedCounter {
 public:
  ShardedCounter& operator+=(uint64_t n) {
    cells_[metric_shard()].value.fetch_add(n, std::memory_order_relaxed);
    return *this;
  }
  ShardedCounter& operator++() { return *this += 1; }
  uint64_t value() const;

 private:
  struct alignas(64) Cell {
    std::atomic<uint64_t> value{0};
  };
  std::array<Cell, kMetricShards> cells_;
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
  ShardedCounter prompt_tokens_total;
  ShardedCounter completion_tokens_total;
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
