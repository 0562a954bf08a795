// The engine over the real V4 CPU model on the tiny HF fixture (tests/fixtures/hf_v4_a):
// offline throughput vs batch size and prompt/output lengths (`batched` 0: sequences one by one,
// as before the batched forward; `invariant` 0: one GEMM per weight for all rows instead of the
// batch-invariant grouping), plus the V4-Flash KV
// bytes per token per layer kind (fp32, packed, as laid out in blocks), printed once as counters.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "engine/batch.h"
#include "engine/kv_layout.h"
#include "engine/v4_model_runner.h"
#include "model/model.h"

namespace deepinfer::engine {
namespace {

const std::string kFixture = std::string(DEEPINFER_SOURCE_DIR) + "/tests/fixtures/hf_v4_a";

void BM_V4Offline(benchmark::State& state) {
  const auto batch = static_cast<int32_t>(state.range(0));
  const auto prompt_len = static_cast<int32_t>(state.range(1));
  const auto output_len = static_cast<int32_t>(state.range(2));
  auto model =
      model::Model::load(kFixture, {static_cast<int>(state.range(3)), state.range(4) != 0});
  if (!model.ok()) {
    state.SkipWithError(model.error().message.c_str());
    return;
  }
  V4ModelRunner runner(*model.value());
  runner.set_batched_forward(state.range(5) != 0);
  EngineConfig config;
  config.kv.block_size = 16;
  config.kv.num_blocks = 4096;
  config.kv.prefix_caching = false;
  config.scheduler.max_num_seqs = batch;
  config.scheduler.max_num_batched_tokens = 2048;
  auto engine = Engine::create(config, runner);
  if (!engine.ok()) {
    state.SkipWithError(engine.error().message.c_str());
    return;
  }
  int64_t generated = 0;
  for (auto _ : state) {
    std::vector<EngineRequest> requests(batch);
    for (int32_t i = 0; i < batch; ++i) {
      for (int32_t k = 0; k < prompt_len; ++k)
        requests[i].prompt.push_back(3 + (i * 37 + k * 11) % 1270);
      requests[i].params.max_tokens = output_len;
      requests[i].params.ignore_eos = true;
      requests[i].params.temperature = 0.0f;
    }
    for (const BatchResult& r : generate_batch(*engine.value(), std::move(requests)))
      generated += static_cast<int64_t>(r.ids.size());
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(generated), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_V4Offline)
    ->ArgNames({"batch", "prompt", "output", "threads", "invariant", "batched"})
    ->Args({1, 64, 32, 1, 1, 1})
    ->Args({8, 64, 32, 1, 1, 1})
    ->Args({32, 64, 32, 1, 1, 1})
    ->Args({32, 64, 32, 1, 1, 0})
    ->Args({32, 64, 32, 1, 0, 1})
    ->Args({1, 4, 64, 1, 1, 1})
    ->Args({32, 4, 64, 1, 1, 1})
    ->Args({32, 4, 64, 1, 1, 0})
    ->Args({32, 4, 64, 1, 0, 1})
    ->Args({64, 4, 64, 1, 1, 1})
    ->Args({64, 4, 64, 1, 1, 0})
    ->Args({8, 512, 8, 1, 1, 1})
    ->Args({8, 512, 8, 1, 1, 0})
    ->Args({8, 64, 32, 2, 1, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Batch 1 overhead: the same greedy generation through the engine (async loop + worker thread,
// or the loop thread executing itself) and through the model alone (forward + argmax, no engine).
void BM_V4BatchOne(benchmark::State& state) {
  const auto prompt_len = static_cast<int32_t>(state.range(0));
  const auto output_len = static_cast<int32_t>(state.range(1));
  const int mode = static_cast<int>(state.range(2));  // 0 model alone, 1 engine sync, 2 async
  auto model = model::Model::load(kFixture, {1});
  if (!model.ok()) {
    state.SkipWithError(model.error().message.c_str());
    return;
  }
  model::Model& m = *model.value();
  std::vector<int32_t> prompt;
  for (int32_t k = 0; k < prompt_len; ++k) prompt.push_back(3 + (k * 11) % 1270);
  int64_t generated = 0;
  const std::clock_t cpu0 = std::clock();  // process CPU time: every thread's share of the work
  if (mode == 0) {
    std::vector<float> logits(static_cast<size_t>(m.config().vocab_size));
    for (auto _ : state) {
      model::SequenceState st = m.new_state();
      const int64_t last = prompt_len - 1, zero = 0;
      (void)m.forward(st, prompt, std::span(&last, 1), logits.data());
      for (int32_t i = 0; i < output_len; ++i) {
        const auto tok =
            static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        ++generated;
        if (i + 1 < output_len)
          (void)m.forward(st, std::span(&tok, 1), std::span(&zero, 1), logits.data());
      }
    }
  } else {
    V4ModelRunner runner(m);
    EngineConfig config;
    config.kv.block_size = 16;
    config.kv.num_blocks = 256;
    config.kv.prefix_caching = false;
    config.async_scheduling = mode == 2;
    auto engine = Engine::create(config, runner);
    if (!engine.ok()) {
      state.SkipWithError(engine.error().message.c_str());
      return;
    }
    for (auto _ : state) {
      EngineRequest r;
      r.prompt = prompt;
      r.params.max_tokens = output_len;
      r.params.ignore_eos = true;
      r.params.temperature = 0.0f;
      for (const BatchResult& res : generate_batch(*engine.value(), {r}))
        generated += static_cast<int64_t>(res.ids.size());
    }
  }
  const double cpu_s = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(generated), benchmark::Counter::kIsRate);
  state.counters["tokens_per_cpu_s"] = static_cast<double>(generated) / std::max(1e-9, cpu_s);
}
BENCHMARK(BM_V4BatchOne)
    ->ArgNames({"prompt", "output", "mode"})
    ->Args({4, 64, 0})
    ->Args({4, 64, 1})
    ->Args({4, 64, 2})
    ->Args({64, 32, 0})
    ->Args({64, 32, 1})
    ->Args({64, 32, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Not a timing: reports KV bytes per token per layer kind for V4-Flash (spec §2.1/§3 dims).
void BM_V4FlashKvBytes(benchmark::State& state) {
  model::ModelConfig c;
  c.num_layers = 43;
  c.head_dim = 512;
  c.rope_dim = 64;
  c.index_head_dim = 128;
  c.sliding_window = 128;
  c.compress_ratios = {0, 0};
  for (int layer = 2; layer < 43; ++layer) c.compress_ratios.push_back(layer % 2 ? 128 : 4);
  V4KvBytes stored, packed;
  for (auto _ : state) {
    stored = v4_kv_bytes_stored(c);
    packed = v4_kv_bytes_packed(c);
    benchmark::DoNotOptimize(stored);
  }
  state.counters["stored_csa_B_tok_layer"] = stored.csa_per_token;
  state.counters["stored_hca_B_tok_layer"] = stored.hca_per_token;
  state.counters["stored_B_tok"] = stored.per_token;
  state.counters["stored_GB_1M"] = stored.per_token * (1 << 20) / 1e9;
  state.counters["packed_csa_B_tok_layer"] = packed.csa_per_token;
  state.counters["packed_hca_B_tok_layer"] = packed.hca_per_token;
  state.counters["packed_B_tok"] = packed.per_token;
  state.counters["packed_GB_1M"] = packed.per_token * (1 << 20) / 1e9;
  for (int32_t bs : {16, 128}) {
    const V4BlockBytes in_blocks = v4_kv_bytes_in_blocks(c, bs, true);
    const std::string tag = "blocks" + std::to_string(bs) + "_";
    state.counters[tag + "csa_B_tok_layer"] = in_blocks.per_token.csa_per_token;
    state.counters[tag + "hca_B_tok_layer"] = in_blocks.per_token.hca_per_token;
    state.counters[tag + "B_tok"] = in_blocks.per_token.per_token;
    state.counters[tag + "GB_1M"] = in_blocks.per_token.per_token * (1 << 20) / 1e9;
  }
  state.counters["stored_bounded_MB"] =
      static_cast<double>(stored.ring_bytes + stored.tail_bytes) / 1e6;
  state.counters["packed_bounded_MB"] =
      static_cast<double>(packed.ring_bytes + packed.tail_bytes) / 1e6;
}
BENCHMARK(BM_V4FlashKvBytes)->Iterations(1);

}  // namespace
}  // namespace deepinfer::engine

BENCHMARK_MAIN();
