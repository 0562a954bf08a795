#include "server/metrics.h"

#include <cstdio>

namespace deepinfer::server {
namespace {

void append_number(std::string& out, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  out += buf;
}

void counter(std::string& out, const char* name, const char* help, double v, const char* type) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
  out += name;
  out += ' ';
  append_number(out, v);
  out += '\n';
}

std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}

std::vector<double> token_delay_buckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1};
}

}  // namespace

size_t metric_shard() {
  static std::atomic<size_t> next{0};
  thread_local const size_t shard = next.fetch_add(1, std::memory_order_relaxed) % kMetricShards;
  return shard;
}

uint64_t ShardedCounter::value() const {
  uint64_t total = 0;
  for (const Cell& c : cells_) total += c.value.load(std::memory_order_relaxed);
  return total;
}

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  if (bounds_.size() > kMaxBounds) bounds_.resize(kMaxBounds);  // the bucket lists are ours
}

void Histogram::observe(double value, uint64_t times) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  Shard& shard = shards_[metric_shard()];
  std::lock_guard lock(shard.mu);
  shard.counts[i] += times;
  shard.sum += value * static_cast<double>(times);
  shard.count += times;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  render_series(out, name, "");
}

void Histogram::render_series(std::string& out, const std::string& name,
                              const std::string& labels) const {
  std::array<uint64_t, kMaxBounds + 1> counts{};
  double sum = 0;
  uint64_t count = 0;
  for (const Shard& shard : shards_) {  // each shard read whole, so its buckets sum to its count
    std::lock_guard lock(shard.mu);
    for (size_t i = 0; i <= bounds_.size(); ++i) counts[i] += shard.counts[i];
    sum += shard.sum;
    count += shard.count;
  }
  const std::string first = labels.empty() ? "" : labels + ",";
  const std::string only = labels.empty() ? "" : "{" + labels + "}";
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts[i];
    out += name + "_bucket{" + first + "le=\"";
    if (i == bounds_.size())
      out += "+Inf";
    else
      append_number(out, bounds_[i]);
    out += "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_sum" + only + " ";
  append_number(out, sum);
  out += "\n" + name + "_count" + only + " " + std::to_string(count) + "\n";
}

Metrics::Metrics()
    : ttft_seconds(latency_buckets()),
      tpot_seconds(latency_buckets()),
      e2e_seconds(latency_buckets()),
      stream_first_token_delay_seconds(token_delay_buckets()),
      stream_later_token_delay_seconds(token_delay_buckets()) {}

void Metrics::observe_token_delay(const TokenDelay& delay) {
  (delay.first ? stream_first_token_delay_seconds : stream_later_token_delay_seconds)
      .observe(delay.server(), static_cast<uint64_t>(delay.tokens));
}

void Metrics::set_gauge_source(std::function<std::vector<Gauge>()> source) {
  gauge_source_ = std::move(source);
}

std::string Metrics::render() const {
  std::string out;
  counter(out, "deepinfer_requests_total", "Requests received.", double(requests_total), "counter");
  counter(out, "deepinfer_requests_failed_total", "Requests answered with an error.",
          double(requests_failed), "counter");
  counter(out, "deepinfer_requests_rejected_total", "Requests rejected (429/503).",
          double(requests_rejected), "counter");
  counter(out, "deepinfer_prompt_tokens_total", "Prompt tokens processed.",
          double(prompt_tokens_total.value()), "counter");
  counter(out, "deepinfer_generation_tokens_total", "Tokens generated.",
          double(completion_tokens_total.value()), "counter");
  counter(out, "deepinfer_requests_running", "Requests being generated.", double(requests_running),
          "gauge");
  ttft_seconds.render(out, "deepinfer_time_to_first_token_seconds", "Time to first token.");
  tpot_seconds.render(out, "deepinfer_time_per_output_token_seconds", "Time per output token.");
  e2e_seconds.render(out, "deepinfer_e2e_request_latency_seconds", "End-to-end request latency.");
  const std::string delay = "deepinfer_stream_token_delay_seconds";
  out += "# HELP " + delay +
         " Per streamed token: engine event to its bytes taken by the socket, less any wait for "
         "the engine's next token while its text was held back (phase: the stream's first token "
         "or a later one).\n# TYPE " +
         delay + " histogram\n";
  stream_first_token_delay_seconds.render_series(out, delay, "phase=\"first\"");
  stream_later_token_delay_seconds.render_series(out, delay, "phase=\"later\"");
  if (gauge_source_)
    for (const auto& g : gauge_source_())
      counter(out, g.name.c_str(), g.help.c_str(), g.value, "gauge");
  return out;
}

}  // namespace deepinfer::server
