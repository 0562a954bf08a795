// Scheduler: continuous batching under a per-step token budget. Running requests go first
// (decodes and the next chunks of chunked prefills, FCFS), then waiting ones in arrival order
// (no overtaking). When blocks run out the most recently admitted request is preempted: its KV
// is freed and it is recomputed later from its tokens. schedule() may run while the previous
// step executes (async scheduling): decodes of steps in flight are counted as pending tokens.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/kv_cache_manager.h"
#include "engine/request.h"
#include "engine/step.h"

namespace deepinfer::engine {

struct SchedulerConfig {
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 2048;
  int32_t max_model_len = 8192;  // prompt + output; capped by the KV pool's capacity
  bool chunked_prefill = true;
  // A prefill chunk cut by the budget ends on a block boundary when that leaves it non-empty, so
  // the positions a model processes together do not depend on the rest of the batch.
  bool block_aligned_chunks = true;
  std::vector<int32_t> eos_token_ids;
};

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t prompt_cache_hit_tokens = 0;
};

// What a step (or an abort) did to one request: a new token and/or its end.
struct RequestEvent {
  uint64_t request_id = 0;
  bool has_token = false;
  SampleResult sample;  // token (+ logprobs when asked)
  FinishReason finish = FinishReason::kNone;
  Usage usage;                 // set on the first token and when finish != kNone
  std::string error;           // set when finish == kError
  double ttft_seconds = -1.0;  // set on the first token
  double tpot_seconds = -1.0;  // time since the previous token, on later tokens
  // When the engine began handing this step's events to the callbacks (one time for them all),
  // so that a caller can tell its own delay from the engine's.
  Clock::time_point handed_over{};
};

inline RequestEvent event_for(uint64_t request_id) {
  RequestEvent ev;
  ev.request_id = request_id;
  return ev;
}

struct SchedulerStats {
  int64_t prefix_query_tokens = 0;  // prompt tokens looked up at first admission
  int64_t prefix_hit_tokens = 0;
  int64_t num_preemptions = 0;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, const KvCacheConfig& kv_config);

  const SchedulerConfig& config() const { return config_; }
  int32_t max_model_len() const { return max_model_len_; }
  const KvCacheManager& kv() const { return kv_; }
  const SchedulerStats& stats() const { return stats_; }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  bool has_unfinished() const { return !requests_.empty(); }
  const Request* find(uint64_t id) const;

  // Queues a request (its prompt must fit: checked here, with a clear message).
  Status add(std::unique_ptr<Request> request);
  // Ends a request now, freeing its blocks; false when unknown or finished. Emits its event.
  bool abort(uint64_t id, std::vector<RequestEvent>& events);

  // Plans the next step into `out` (cleared first).
  void schedule(SchedulerOutput& out);
  // Applies a finished step: appends sampled tokens, checks stop conditions, publishes full
  // blocks to the prefix cache, frees finished requests. Appends one event per change.
  void update(const SchedulerOutput& done, const ModelOutput& result,
              std::vector<RequestEvent>& events);
  // Removes requests that ended after `next` was planned from it, and tells the executor.
  void drop_released(SchedulerOutput& next);

 private:
  void preempt(Request& req, SchedulerOutput& out);
  void finish(Request& req, FinishReason reason, std::vector<RequestEvent>& events,
              std::string error = {});
  FinishReason check_stop(const Request& req, int32_t token) const;
  bool done_ahead(const Request& req) const;
  int32_t chunk_size(int32_t start, int32_t wanted, int32_t budget, bool step_has_work) const;

  SchedulerConfig config_;
  int32_t max_model_len_;
  KvCacheManager kv_;
  std::unordered_map<uint64_t, std::unique_ptr<Request>> requests_;
  std::vector<Request*> running_;
  std::deque<Request*> waiting_;
  std::vector<RequestSlot> released_;  // ended since the last schedule()
  std::vector<int32_t> hit_;           // scratch for prefix lookups
  SchedulerStats stats_;
  uint64_t step_ = 0;
};

}  // namespace deepinfer::engine
