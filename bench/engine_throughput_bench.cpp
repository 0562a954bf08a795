// Offline throughput of the whole engine (scheduler + executor + sampler, async loop) over the
// deterministic fake model, vs batch size and prompt/output lengths, greedy or nucleus sampling
// (vocab 4096). The fake model costs a few hash rounds per token, so this measures the engine's own
// ceiling, not a model.
#include <benchmark/benchmark.h>

#include <vector>

#include "engine/batch.h"
#include "engine/fake_model.h"

namespace deepinfer::engine {
namespace {

void BM_EngineOffline(benchmark::State& state) {
  const auto batch = static_cast<int32_t>(state.range(0));
  const auto prompt_len = static_cast<int32_t>(state.range(1));
  const auto output_len = static_cast<int32_t>(state.range(2));
  FakeModelConfig mc;
  mc.vocab_size = 4096;
  FakeModel model(mc);
  EngineConfig config;
  config.kv.block_size = 16;
  config.kv.num_blocks = 1 << 16;
  config.kv.prefix_caching = false;
  config.scheduler.max_num_seqs = batch;
  config.scheduler.max_num_batched_tokens = 4096;
  config.scheduler.max_model_len = 1 << 16;
  auto engine = Engine::create(config, model);
  if (!engine.ok()) {
    state.SkipWithError(engine.error().message.c_str());
    return;
  }
  int64_t generated = 0;
  for (auto _ : state) {
    std::vector<EngineRequest> requests(batch);
    for (int32_t i = 0; i < batch; ++i) {
      for (int32_t k = 0; k < prompt_len; ++k) requests[i].prompt.push_back(3 + (i * 7 + k) % 4000);
      requests[i].params.max_tokens = output_len;
      requests[i].params.ignore_eos = true;
      if (state.range(3)) {
        requests[i].params.temperature = 0.8f;
        requests[i].params.top_p = 0.95f;
      } else {
        requests[i].params.temperature = 0.0f;
      }
      requests[i].params.seed = static_cast<uint64_t>(i);
    }
    for (const BatchResult& r : generate_batch(*engine.value(), std::move(requests)))
      generated += static_cast<int64_t>(r.ids.size());
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(generated), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EngineOffline)
    ->ArgNames({"batch", "prompt", "output", "top_p"})
    ->Args({1, 128, 128, 0})
    ->Args({16, 128, 128, 0})
    ->Args({64, 128, 128, 0})
    ->Args({256, 128, 32, 0})
    ->Args({64, 1024, 32, 0})
    ->Args({64, 128, 128, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace deepinfer::engine

BENCHMARK_MAIN();
