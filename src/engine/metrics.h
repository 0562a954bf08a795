// Engine metrics: a snapshot struct the engine refreshes after every step (the server exposes
// it later). Histograms have fixed bucket bounds in seconds (Prometheus style, cumulative on
// export, per-bucket here).
#pragma once

#include <array>
#include <cstdint>

namespace deepinfer::engine {

struct LatencyHistogram {
  static constexpr std::array<double, 12> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                     0.1,   0.25,   0.5,   1.0,  2.5,   10.0};
  std::array<uint64_t, kBounds.size() + 1> counts{};  // last bucket: > 10 s
  uint64_t count = 0;
  double sum = 0.0;

  void observe(double seconds) {
    size_t b = 0;
    while (b < kBounds.size() && seconds > kBounds[b]) ++b;
    ++counts[b];
    ++count;
    sum += seconds;
  }
  double mean() const { return count ? sum / static_cast<double>(count) : 0.0; }
};

struct EngineMetrics {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_used = 0;  // referenced by a request
  int32_t kv_blocks_free = 0;  // free or cached-and-evictable
  int32_t kv_blocks_cached = 0;
  int64_t prefix_query_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  double prefix_hit_rate = 0.0;  // hit / query prompt tokens
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t num_preemptions = 0;
  int64_t num_steps = 0;
  double tokens_per_second = 0.0;  // generated tokens / engine busy time
  double busy_seconds = 0.0;
  LatencyHistogram ttft, tpot;
};

}  // namespace deepinfer::engine
