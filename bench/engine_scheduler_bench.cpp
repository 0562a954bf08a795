// Scheduler overhead per step, model excluded: 256 running requests in steady decode (plus a
// variant with chunked prefills joining), measuring schedule() + update() with synthetic
// sampled tokens. Target (issue 5): <= 200 us per step with 256 running requests.
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "engine/scheduler.h"

namespace deepinfer::engine {
namespace {

void run_steps(benchmark::State& state, int32_t num_requests, int32_t prompt_len,
               bool prefix_caching) {
  SchedulerConfig sc;
  sc.max_num_seqs = num_requests;
  sc.max_num_batched_tokens = 8192;
  sc.max_model_len = 1 << 20;
  sc.eos_token_ids = {1};
  KvCacheConfig kc;
  kc.block_size = 16;
  kc.num_blocks = 1 << 18;  // never preempts within the 2,000 timed steps
  kc.num_state_slots = num_requests;
  kc.prefix_caching = prefix_caching;
  Scheduler scheduler(sc, kc);
  uint64_t next_id = 1;
  auto add = [&] {
    auto r = std::make_unique<Request>();
    r->id = next_id++;
    r->params.max_tokens = 1 << 30;
    r->params.ignore_eos = true;
    for (int32_t i = 0; i < prompt_len; ++i) r->tokens.push_back(3 + (r->id * 131 + i) % 1000);
    (void)scheduler.add(std::move(r));
  };
  for (int32_t i = 0; i < num_requests; ++i) add();
  SchedulerOutput out;
  ModelOutput result;
  std::vector<RequestEvent> events;
  int32_t token = 5;
  auto step = [&] {
    scheduler.schedule(out);
    result.clear();
    for (const ScheduledSequence& s : out.scheduled) {
      if (!s.sample) continue;
      SampledToken& t = result.sampled.emplace_back();
      t.request_id = s.request_id;
      t.result.token = 3 + (token++ % 1000);
    }
    events.clear();
    scheduler.update(out, result, events);
  };
  while (scheduler.num_waiting() > 0) step();  // prefills done: all in decode
  for (auto _ : state) step();
  state.counters["running"] = scheduler.num_running();
  state.counters["tokens_per_step"] = static_cast<double>(out.num_tokens);
  state.SetItemsProcessed(state.iterations() * out.num_tokens);
}

void BM_SchedulerDecodeStep(benchmark::State& state) {
  run_steps(state, static_cast<int32_t>(state.range(0)), 512, state.range(1) != 0);
}
BENCHMARK(BM_SchedulerDecodeStep)
    ->Args({256, 1})
    ->Args({256, 0})
    ->Args({64, 1})
    ->Args({1024, 1})
    ->Iterations(2000)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace deepinfer::engine

BENCHMARK_MAIN();
