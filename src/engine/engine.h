// Engine: the serving loop on its own thread. Callers submit(request, callback) from any
// thread and get a handle; the callback runs on the engine thread for every token and for the
// end (finish reason + usage), so it must be quick (push to a queue). abort(handle) frees the
// request's blocks before the next step. With async scheduling the next step is planned while
// the current one executes on a worker thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/result.h"
#include "engine/metrics.h"
#include "engine/model_runner.h"
#include "engine/scheduler.h"

namespace deepinfer::engine {

struct EngineConfig {
  SchedulerConfig scheduler;
  KvCacheConfig kv;
  int64_t kv_cache_memory = 0;  // bytes; > 0 sets kv.num_blocks from the runner's block size
  bool async_scheduling = true;
  int32_t num_threads = 1;  // sampling threads of the executor
};

struct EngineRequest {
  std::vector<int32_t> prompt;
  SamplingParams params;
};

using EventCallback = std::function<void(const RequestEvent&)>;

class Engine {
 public:
  // Sizes the KV store (runner.allocate) and starts the loop thread. `runner` must outlive it.
  static Result<std::unique_ptr<Engine>> create(const EngineConfig& config, ModelRunner& runner);
  ~Engine();  // aborts what is left, then joins the threads
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and queues; the handle is the request id. Errors come back here, not as events.
  Result<uint64_t> submit(EngineRequest request, EventCallback callback);
  void abort(uint64_t handle);
  // Runs on the engine thread after each batch of events has been handed to the callbacks, so
  // that callbacks which only collect can hand the whole batch on at once. Set it before the
  // first submit (it takes effect at the loop's next pass).
  void set_after_deliver(std::function<void()> hook);

  EngineMetrics metrics() const;
  const EngineConfig& config() const { return config_; }
  int32_t max_model_len() const;

 private:
  Engine(const EngineConfig& config, ModelRunner& runner);
  void loop();
  void worker();
  void drain_inbox(std::vector<RequestEvent>& events);
  void deliver(std::vector<RequestEvent>& events);
  void refresh_metrics(double step_seconds);

  struct Submission {
    std::unique_ptr<Request> request;
    EventCallback callback;
  };
  struct Impl;
  EngineConfig config_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer::engine
