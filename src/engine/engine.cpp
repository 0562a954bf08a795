// Engine loop: drain the inbox → schedule step N+1 → collect step N → hand N+1 to the worker.
#include "engine/engine.h"

#include <atomic>
#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>

#include "engine/executor.h"
#include "engine/structured_request.h"

namespace deepinfer::engine {

struct Engine::Impl {
  Impl(const EngineConfig& config, ModelRunner& r)
      : runner(r),
        scheduler(config.scheduler, config.kv),
        executor(r, config.kv.num_state_slots, config.num_threads, scheduler.max_model_len()) {}

  ModelRunner& runner;
  Scheduler scheduler;
  Executor executor;
  uint64_t seed_salt = 0;
  std::atomic<uint64_t> next_id{1};

  std::mutex inbox_mutex;
  std::condition_variable inbox_cv;
  std::vector<Submission> submissions;
  std::vector<uint64_t> aborts;
  bool stop = false;

  std::mutex work_mutex;
  std::condition_variable work_cv;
  const SchedulerOutput* job = nullptr;
  bool job_done = false;
  bool worker_stop = false;

  std::unordered_map<uint64_t, EventCallback> callbacks;   // engine thread only
  std::function<void()> after_deliver;                     // engine thread only
  std::optional<std::function<void()>> new_after_deliver;  // under inbox_mutex, until taken
  SchedulerOutput outs[2];
  ModelOutput model_out;

  mutable std::mutex metrics_mutex;
  EngineMetrics metrics;
  double busy_seconds = 0.0;

  std::thread loop_thread, worker_thread;
};

Engine::Engine(const EngineConfig& config, ModelRunner& runner)
    : config_(config), impl_(std::make_unique<Impl>(config, runner)) {}

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config_in, ModelRunner& runner) {
  EngineConfig config = config_in;
  if (config.kv.block_size < 1) return Error{"kv block size must be >= 1"};
  if (config.scheduler.max_num_seqs < 1) return Error{"max_num_seqs must be >= 1"};
  if (config.scheduler.max_num_batched_tokens < 1)
    return Error{"max_num_batched_tokens must be >= 1"};
  if (config.scheduler.max_model_len < 2) return Error{"max_model_len must be >= 2"};
  if (config.num_threads < 1) return Error{"num_threads must be >= 1"};
  if (config.kv_cache_memory > 0) {
    const int64_t slots = int64_t{config.scheduler.max_num_seqs} * runner.bytes_per_slot();
    const int64_t per_block = runner.bytes_per_block(config.kv.block_size);
    const int64_t blocks = (config.kv_cache_memory - slots) / std::max<int64_t>(1, per_block);
    if (blocks < 1)
      return Error{"--kv-cache-memory " + std::to_string(config.kv_cache_memory) +
                   " bytes is too small: one block takes " + std::to_string(per_block) +
                   " bytes and the state slots " + std::to_string(slots)};
    config.kv.num_blocks = static_cast<int32_t>(std::min<int64_t>(blocks, INT32_MAX / 2));
  }
  if (config.kv.num_blocks < 1) return Error{"the KV cache needs at least one block"};
  config.kv.num_state_slots = config.scheduler.max_num_seqs;
  if (!runner.exact_prefix_snapshots()) config.kv.prefix_caching = false;
  if (Status s = runner.allocate(config.kv); !s.ok()) return s.error();
  std::unique_ptr<Engine> engine(new Engine(config, runner));
  engine->impl_->seed_salt = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  engine->impl_->loop_thread = std::thread([e = engine.get()] { e->loop(); });
  if (config.async_scheduling)
    engine->impl_->worker_thread = std::thread([e = engine.get()] { e->worker(); });
  return engine;
}

Engine::~Engine() {
  {
    std::lock_guard lock(impl_->inbox_mutex);
    impl_->stop = true;
  }
  impl_->inbox_cv.notify_all();
  impl_->loop_thread.join();
  if (impl_->worker_thread.joinable()) {
    {
      std::lock_guard lock(impl_->work_mutex);
      impl_->worker_stop = true;
    }
    impl_->work_cv.notify_all();
    impl_->worker_thread.join();
  }
}

int32_t Engine::max_model_len() const { return impl_->scheduler.max_model_len(); }

Result<uint64_t> Engine::submit(EngineRequest request, EventCallback callback) {
  const int32_t vocab = impl_->runner.vocab_size();
  if (Status s = validate(request.params, vocab); !s.ok()) return s.error();
  if (request.prompt.empty()) return Error{"the prompt is empty"};
  for (int32_t t : request.prompt)
    if (t < 0 || t >= vocab)
      return Error{"prompt token " + std::to_string(t) + " is outside the vocabulary of " +
                   std::to_string(vocab)};
  const int32_t max_len = max_model_len();
  if (static_cast<int64_t>(request.prompt.size()) >= max_len)
    return Error{"the prompt has " + std::to_string(request.prompt.size()) +
                 " tokens; the limit is " + std::to_string(max_len - 1) +
                 " (max_model_len minus one generated token)"};
  if (request.params.structured) {
    // The constraint's end tokens: the caller's, the engine's EOS ids and the request's stops.
    const structured::StructuredOutput& so = *request.params.structured;
    if (!so.grammar) return Error{"structured output: no grammar"};
    if (so.grammar->vocab().vocab_size() > static_cast<size_t>(vocab))
      return Error{"structured output: the grammar's vocabulary (" +
                   std::to_string(so.grammar->vocab().vocab_size()) +
                   " ids) is larger than the model's (" + std::to_string(vocab) + ")"};
    auto merged = std::make_shared<structured::StructuredOutput>(so);
    if (!request.params.ignore_eos)
      merged->end_tokens.insert(merged->end_tokens.end(), config_.scheduler.eos_token_ids.begin(),
                                config_.scheduler.eos_token_ids.end());
    merged->end_tokens.insert(merged->end_tokens.end(), request.params.stop_token_ids.begin(),
                              request.params.stop_token_ids.end());
    request.params.structured = std::move(merged);
  }
  auto req = std::make_unique<Request>();
  req->id = impl_->next_id.fetch_add(1);
  req->params = std::move(request.params);
  req->seed =
      req->params.seed ? *req->params.seed : impl_->seed_salt ^ (req->id * 0x9E3779B97F4A7C15ull);
  req->tokens = std::move(request.prompt);
  req->arrival = Clock::now();
  const uint64_t id = req->id;
  {
    std::lock_guard lock(impl_->inbox_mutex);
    impl_->submissions.push_back({std::move(req), std::move(callback)});
  }
  impl_->inbox_cv.notify_one();
  return id;
}

void Engine::abort(uint64_t handle) {
  {
    std::lock_guard lock(impl_->inbox_mutex);
    impl_->aborts.push_back(handle);
  }
  impl_->inbox_cv.notify_one();
}

EngineMetrics Engine::metrics() const {
  std::lock_guard lock(impl_->metrics_mutex);
  return impl_->metrics;
}

void Engine::drain_inbox(std::vector<RequestEvent>& events) {
  Impl& m = *impl_;
  std::vector<Submission> submissions;
  std::vector<uint64_t> aborts;
  {
    std::lock_guard lock(m.inbox_mutex);
    submissions.swap(m.submissions);
    aborts.swap(m.aborts);
    if (m.new_after_deliver) {
      m.after_deliver = std::move(*m.new_after_deliver);
      m.new_after_deliver.reset();
    }
  }
  for (Submission& s : submissions) {
    const uint64_t id = s.request->id;
    m.callbacks.emplace(id, std::move(s.callback));
    if (Status st = m.scheduler.add(std::move(s.request)); !st.ok()) {
      RequestEvent ev = event_for(id);
      ev.finish = FinishReason::kError;
      ev.error = st.error().message;
      events.push_back(std::move(ev));
    }
  }
  for (uint64_t id : aborts) m.scheduler.abort(id, events);
}

void Engine::deliver(std::vector<RequestEvent>& events) {
  Impl& m = *impl_;
  {
    std::lock_guard lock(m.metrics_mutex);
    for (const RequestEvent& ev : events) {
      if (ev.ttft_seconds >= 0) m.metrics.ttft.observe(ev.ttft_seconds);
      if (ev.tpot_seconds >= 0) m.metrics.tpot.observe(ev.tpot_seconds);
    }
  }
  const auto handed_over = Clock::now();
  for (RequestEvent& ev : events) {
    ev.handed_over = handed_over;
    const auto it = m.callbacks.find(ev.request_id);
    if (it == m.callbacks.end()) continue;
    if (it->second) it->second(ev);
    if (ev.finish != FinishReason::kNone) m.callbacks.erase(it);
  }
  const bool any = !events.empty();
  events.clear();
  if (any && m.after_deliver) m.after_deliver();
}

void Engine::set_after_deliver(std::function<void()> hook) {
  Impl& m = *impl_;
  std::lock_guard lock(m.inbox_mutex);
  m.new_after_deliver = std::move(hook);  // the loop takes it before its next submissions
}

void Engine::refresh_metrics(double step_seconds) {
  Impl& m = *impl_;
  const Scheduler& s = m.scheduler;
  const BlockPool& pool = s.kv().pool();
  std::lock_guard lock(m.metrics_mutex);
  EngineMetrics& out = m.metrics;
  out.num_running = s.num_running();
  out.num_waiting = s.num_waiting();
  out.kv_blocks_total = pool.num_blocks();
  out.kv_blocks_used = pool.num_used();
  out.kv_blocks_free = pool.num_free();
  out.kv_blocks_cached = pool.num_cached();
  out.prefix_query_tokens = s.stats().prefix_query_tokens;
  out.prefix_hit_tokens = s.stats().prefix_hit_tokens;
  out.prefix_hit_rate = out.prefix_query_tokens ? static_cast<double>(out.prefix_hit_tokens) /
                                                      static_cast<double>(out.prefix_query_tokens)
                                                : 0.0;
  out.prompt_tokens = s.stats().prompt_tokens;
  out.generated_tokens = s.stats().generated_tokens;
  out.num_preemptions = s.stats().num_preemptions;
  m.busy_seconds += step_seconds;
  out.busy_seconds = m.busy_seconds;
  out.tokens_per_second =
      m.busy_seconds > 0 ? static_cast<double>(out.generated_tokens) / m.busy_seconds : 0.0;
  ++out.num_steps;
}

void Engine::worker() {
  Impl& m = *impl_;
  for (;;) {
    const SchedulerOutput* job;
    {
      std::unique_lock lock(m.work_mutex);
      m.work_cv.wait(lock, [&] { return m.worker_stop || m.job != nullptr; });
      if (m.worker_stop) return;
      job = m.job;
    }
    m.executor.execute(*job, m.model_out);
    {
      std::lock_guard lock(m.work_mutex);
      m.job = nullptr;
      m.job_done = true;
    }
    m.work_cv.notify_all();
  }
}

void Engine::loop() {
  Impl& m = *impl_;
  std::vector<RequestEvent> events;
  const SchedulerOutput* in_flight = nullptr;
  int cur = 0;
  auto collect = [&](SchedulerOutput* next) {
    {
      std::unique_lock lock(m.work_mutex);
      m.work_cv.wait(lock, [&] { return m.job_done; });
      m.job_done = false;
    }
    m.scheduler.update(*in_flight, m.model_out, events);
    if (next) m.scheduler.drop_released(*next);
    in_flight = nullptr;
  };
  for (;;) {
    bool stopping;
    {
      std::unique_lock lock(m.inbox_mutex);
      if (!in_flight && !m.scheduler.has_unfinished())
        m.inbox_cv.wait(lock,
                        [&] { return m.stop || !m.submissions.empty() || !m.aborts.empty(); });
      stopping = m.stop;
    }
    drain_inbox(events);
    if (stopping) {
      if (in_flight) collect(nullptr);
      for (const auto& [id, cb] : m.callbacks) m.scheduler.abort(id, events);
      deliver(events);
      return;
    }
    deliver(events);
    const auto t0 = Clock::now();
    SchedulerOutput& next = m.outs[cur];
    m.scheduler.schedule(next);
    if (in_flight) collect(&next);
    if (!next.empty()) {
      if (config_.async_scheduling) {
        {
          std::lock_guard lock(m.work_mutex);
          m.job = &next;
        }
        m.work_cv.notify_all();
        in_flight = &next;
        cur ^= 1;
      } else {
        m.executor.execute(next, m.model_out);
        m.scheduler.update(next, m.model_out, events);
      }
    }
    refresh_metrics(std::chrono::duration<double>(Clock::now() - t0).count());
    deliver(events);  // after the metrics, so a caller woken by an end sees them updated
    if (!in_flight && next.empty() && m.scheduler.has_unfinished()) {
      std::unique_lock lock(m.inbox_mutex);  // nothing schedulable: do not spin
      m.inbox_cv.wait_for(lock, std::chrono::milliseconds(1));
    }
  }
}

}  // namespace deepinfer::engine
