// Engine with the fake model: outputs equal a from-scratch reference (the fake's logits for the
// whole sequence + the Sampler), batched == one by one, prefix hit == cold run, preemption +
// resume == uninterrupted, abort frees every block, a 1,000-request flood on a tiny KV pool,
// determinism across runs, thread counts and sync/async scheduling.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "engine/batch.h"
#include "engine/fake_model.h"

namespace deepinfer::engine {
namespace {

constexpr int32_t kEos = 1;

// What the engine must produce: every step recomputes the logits from the whole sequence.
std::vector<int32_t> reference(const FakeModelConfig& model, const EngineRequest& req,
                               int32_t max_len = 1 << 20) {
  Sampler sampler(model.vocab_size);
  std::vector<int32_t> tokens = req.prompt;
  const auto num_prompt = static_cast<int32_t>(tokens.size());
  for (;;) {
    const std::vector<float> logits = FakeModel::reference_logits(model, tokens);
    const std::span<const int32_t> all(tokens);
    const int32_t t =
        sampler
            .sample(logits, SampleContext{req.params, *req.params.seed, all.first(num_prompt),
                                          all.subspan(num_prompt)})
            .token;
    tokens.push_back(t);
    const auto& stops = req.params.stop_token_ids;
    if ((!req.params.ignore_eos && t == kEos) ||
        std::find(stops.begin(), stops.end(), t) != stops.end())
      break;
    if (static_cast<int32_t>(tokens.size()) - num_prompt >= req.params.max_tokens) break;
    if (static_cast<int32_t>(tokens.size()) >= max_len) break;
  }
  return {tokens.begin() + num_prompt, tokens.end()};
}

EngineConfig small_config() {
  EngineConfig c;
  c.kv.block_size = 4;
  c.kv.num_blocks = 512;
  c.scheduler.max_num_seqs = 64;
  c.scheduler.max_num_batched_tokens = 64;
  c.scheduler.max_model_len = 1024;
  c.scheduler.eos_token_ids = {kEos};
  return c;
}

// Requests of many lengths; even ones greedy, odd ones seeded nucleus sampling with penalties.
std::vector<EngineRequest> mixed_requests(int n, uint32_t seed, int max_prompt = 40,
                                          int max_tokens = 24) {
  std::mt19937 rng(seed);
  std::vector<EngineRequest> out;
  for (int i = 0; i < n; ++i) {
    EngineRequest r;
    const int len = 1 + static_cast<int>(rng() % max_prompt);
    for (int k = 0; k < len; ++k) r.prompt.push_back(2 + static_cast<int32_t>(rng() % 250));
    r.params.max_tokens = 1 + static_cast<int32_t>(rng() % max_tokens);
    r.params.seed = rng();
    if (i % 2 == 0) {
      r.params.temperature = 0.0f;
    } else {
      r.params.temperature = 0.9f;
      r.params.top_p = 0.9f;
      r.params.top_k = 50;
      r.params.frequency_penalty = 0.3f;
      r.params.repetition_penalty = 1.1f;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::vector<int32_t>> run(const EngineConfig& config, FakeModel& model,
                                      const std::vector<EngineRequest>& requests,
                                      EngineMetrics* metrics = nullptr) {
  auto engine = Engine::create(config, model);
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  std::vector<BatchResult> results = generate_batch(*engine.value(), requests);
  std::vector<std::vector<int32_t>> ids;
  for (BatchResult& r : results) {
    EXPECT_TRUE(r.error.empty()) << r.error;
    ids.push_back(std::move(r.ids));
  }
  if (metrics) *metrics = engine.value()->metrics();
  return ids;
}

TEST(Engine, OutputsEqualTheFromScratchReference) {
  FakeModelConfig mc;
  FakeModel model(mc);
  const auto requests = mixed_requests(40, 1);
  const auto got = run(small_config(), model, requests);
  for (size_t i = 0; i < requests.size(); ++i)
    EXPECT_EQ(got[i], reference(mc, requests[i])) << "request " << i;
}

TEST(Engine, BatchedEqualsOneByOne) {
  FakeModel model;
  auto requests = mixed_requests(64, 2);
  const auto batched = run(small_config(), model, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    FakeModel alone_model;
    EngineConfig alone = small_config();
    alone.scheduler.max_num_seqs = 1;
    EXPECT_EQ(run(alone, alone_model, {requests[i]})[0], batched[i]) << "request " << i;
  }
}

TEST(Engine, DeterministicAcrossRunsThreadsAndScheduling) {
  const auto requests = mixed_requests(48, 3);
  FakeModel m0;
  const auto base = run(small_config(), m0, requests);
  for (int threads : {1, 3}) {
    for (bool async : {false, true}) {
      EngineConfig c = small_config();
      c.num_threads = threads;
      c.async_scheduling = async;
      FakeModel m;
      EXPECT_EQ(run(c, m, requests), base) << threads << " threads, async " << async;
    }
  }
}

TEST(Engine, PrefixHitEqualsColdRun) {
  FakeModelConfig mc;
  std::vector<int32_t> shared;
  for (int i = 0; i < 40; ++i) shared.push_back(10 + i);
  EngineRequest first{shared, {}}, second{shared, {}};
  first.prompt.insert(first.prompt.end(), {200, 201, 202});
  second.prompt.insert(second.prompt.end(), {100, 101});
  for (EngineRequest* r : {&first, &second}) {
    r->params.temperature = 0.7f;
    r->params.seed = 99;
    r->params.max_tokens = 30;
  }
  FakeModel model(mc);
  auto engine = Engine::create(small_config(), model);
  ASSERT_TRUE(engine.ok());
  const BatchResult cold = generate_batch(*engine.value(), {first})[0];
  EXPECT_EQ(cold.usage.prompt_cache_hit_tokens, 0);
  const BatchResult warm = generate_batch(*engine.value(), {second})[0];
  EXPECT_EQ(warm.usage.prompt_cache_hit_tokens, 40);  // ten blocks of four
  EXPECT_EQ(warm.ids, reference(mc, second));
  const BatchResult again = generate_batch(*engine.value(), {first})[0];  // prompt + outputs cached
  EXPECT_EQ(again.usage.prompt_cache_hit_tokens, 40);
  EXPECT_EQ(again.ids, cold.ids);
  EXPECT_GT(engine.value()->metrics().prefix_hit_rate, 0.5);

  EngineConfig off = small_config();
  off.kv.prefix_caching = false;
  FakeModel cold_model(mc);
  auto cold_engine = Engine::create(off, cold_model);
  ASSERT_TRUE(cold_engine.ok());
  const BatchResult second_cold = generate_batch(*cold_engine.value(), {second})[0];
  EXPECT_EQ(second_cold.usage.prompt_cache_hit_tokens, 0);
  EXPECT_EQ(second_cold.ids, warm.ids);
}

TEST(Engine, PrefixCachingNeedsRunnerSnapshots) {
  FakeModelConfig mc;
  mc.snapshots = false;
  FakeModel model(mc);
  auto engine = Engine::create(small_config(), model);
  ASSERT_TRUE(engine.ok());
  EngineRequest r{std::vector<int32_t>(30, 5), {}};
  r.params.temperature = 0.0f;
  r.params.seed = 1;
  generate_batch(*engine.value(), {r});
  const BatchResult again = generate_batch(*engine.value(), {r})[0];
  EXPECT_EQ(again.usage.prompt_cache_hit_tokens, 0);
  EXPECT_EQ(again.ids, reference(mc, r));
}

TEST(Engine, PreemptionAndResumeEqualUninterrupted) {
  FakeModelConfig mc;
  const auto requests = mixed_requests(32, 4, 30, 40);
  EngineConfig tight = small_config();
  tight.kv.num_blocks = 40;  // 160 positions for 32 requests of up to 70 tokens
  EngineMetrics metrics;
  FakeModel model(mc);
  const auto got = run(tight, model, requests, &metrics);
  EXPECT_GT(metrics.num_preemptions, 0);
  for (size_t i = 0; i < requests.size(); ++i)
    EXPECT_EQ(got[i], reference(mc, requests[i])) << "request " << i;
}

TEST(Engine, FloodOfAThousandOnATinyPoolFinishesCorrectly) {
  FakeModelConfig mc;
  const auto requests = mixed_requests(1000, 5, 40, 20);
  EngineConfig tiny = small_config();
  tiny.kv.num_blocks = 24;  // 96 positions; the longest request needs 60
  tiny.scheduler.max_num_seqs = 16;
  EngineMetrics metrics;
  FakeModel model(mc);
  const auto got = run(tiny, model, requests, &metrics);
  int wrong = 0;
  for (size_t i = 0; i < requests.size(); ++i) wrong += got[i] != reference(mc, requests[i]);
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(metrics.kv_blocks_used, 0);
  EXPECT_EQ(metrics.num_running + metrics.num_waiting, 0);
}

TEST(Engine, AbortFreesEveryBlock) {
  FakeModelConfig mc;
  mc.work_per_token = 2000;  // slow enough that the aborts land mid-generation
  FakeModel model(mc);
  auto engine = Engine::create(small_config(), model);
  ASSERT_TRUE(engine.ok());
  std::mutex mutex;
  std::vector<FinishReason> ends(20, FinishReason::kNone);
  std::vector<int> tokens(20, 0);
  std::vector<uint64_t> handles;
  for (int i = 0; i < 20; ++i) {
    EngineRequest r{std::vector<int32_t>(10 + i, 7), {}};
    r.params.max_tokens = 500;
    r.params.ignore_eos = true;
    auto h = engine.value()->submit(std::move(r), [&, i](const RequestEvent& ev) {
      std::lock_guard lock(mutex);
      tokens[i] += ev.has_token;
      if (ev.finish != FinishReason::kNone) ends[i] = ev.finish;
    });
    ASSERT_TRUE(h.ok());
    handles.push_back(h.value());
  }
  for (;;) {  // until every request has produced a token
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::lock_guard lock(mutex);
    if (std::all_of(tokens.begin(), tokens.end(), [](int n) { return n > 0; })) break;
  }
  EXPECT_GT(engine.value()->metrics().kv_blocks_used, 0);
  for (uint64_t h : handles) engine.value()->abort(h);
  engine.value()->abort(999999);  // unknown: ignored
  EngineMetrics m;
  for (int spin = 0; spin < 2000; ++spin) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    m = engine.value()->metrics();
    std::lock_guard lock(mutex);
    if (m.num_running + m.num_waiting == 0 &&
        std::none_of(ends.begin(), ends.end(),
                     [](FinishReason f) { return f == FinishReason::kNone; }))
      break;
  }
  EXPECT_EQ(m.kv_blocks_used, 0);
  EXPECT_EQ(m.kv_blocks_free, m.kv_blocks_total);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(ends[i], FinishReason::kAbort);
    EXPECT_LT(tokens[i], 500);
  }
}

TEST(Engine, StopConditionsAndFinishReasons) {
  FakeModelConfig mc;
  FakeModel model(mc);
  auto engine = Engine::create(small_config(), model);
  ASSERT_TRUE(engine.ok());
  EngineRequest base{{5, 6, 7}, {}};
  base.params.temperature = 0.0f;
  base.params.seed = 0;
  base.params.max_tokens = 12;
  base.params.ignore_eos = true;
  const BatchResult plain = generate_batch(*engine.value(), {base})[0];
  ASSERT_EQ(plain.ids.size(), 12u);
  EXPECT_EQ(plain.finish, FinishReason::kLength);
  EXPECT_EQ(plain.usage.prompt_tokens, 3);
  EXPECT_EQ(plain.usage.completion_tokens, 12);
  EngineRequest stop = base;
  stop.params.stop_token_ids = {plain.ids[4]};
  const BatchResult stopped = generate_batch(*engine.value(), {stop})[0];
  EXPECT_EQ(stopped.finish, FinishReason::kStop);
  const auto first = std::find(plain.ids.begin(), plain.ids.end(), plain.ids[4]);
  EXPECT_EQ(stopped.ids, std::vector<int32_t>(plain.ids.begin(), first + 1));
  EngineRequest logprobs = base;
  logprobs.params.logprobs = true;
  logprobs.params.top_logprobs = 2;
  const BatchResult lp = generate_batch(*engine.value(), {logprobs})[0];
  ASSERT_EQ(lp.logprobs.size(), 12u);
  EXPECT_EQ(lp.logprobs[0].num_top, 2);
  EXPECT_EQ(lp.logprobs[0].top[0].token, lp.ids[0]);  // greedy picks the top logprob
}

TEST(Engine, LengthCappedByMaxModelLen) {
  FakeModelConfig mc;
  FakeModel model(mc);
  EngineConfig c = small_config();
  c.scheduler.max_model_len = 20;
  auto engine = Engine::create(c, model);
  ASSERT_TRUE(engine.ok());
  EngineRequest r{std::vector<int32_t>(15, 3), {}};
  r.params.max_tokens = 100;
  r.params.ignore_eos = true;
  r.params.seed = 4;
  const BatchResult out = generate_batch(*engine.value(), {r})[0];
  EXPECT_EQ(out.finish, FinishReason::kLength);
  EXPECT_EQ(out.ids.size(), 5u);
  EXPECT_EQ(out.ids, reference(mc, r, 20));
}

TEST(Engine, SubmitRejectsBadRequestsWithAMessage) {
  FakeModel model;
  EngineConfig c = small_config();
  c.scheduler.max_model_len = 16;
  auto engine = Engine::create(c, model);
  ASSERT_TRUE(engine.ok());
  auto expect_error = [&](EngineRequest r, const std::string& part) {
    auto h = engine.value()->submit(std::move(r), {});
    ASSERT_FALSE(h.ok());
    EXPECT_NE(h.error().message.find(part), std::string::npos) << h.error().message;
  };
  expect_error({{}, {}}, "empty");
  expect_error({{1, 256}, {}}, "vocabulary");
  expect_error({std::vector<int32_t>(16, 2), {}}, "limit is 15");
  EngineRequest bad{{1}, {}};
  bad.params.top_p = 2.0f;
  expect_error(bad, "top_p");
  const std::vector<BatchResult> mixed =
      generate_batch(*engine.value(), {EngineRequest{{}, {}}, EngineRequest{{3, 4}, {}}});
  EXPECT_EQ(mixed[0].finish, FinishReason::kError);
  EXPECT_NE(mixed[1].finish, FinishReason::kError);
}

TEST(Engine, CreateRejectsBadConfigs) {
  FakeModel model;
  for (int which = 0; which < 4; ++which) {
    EngineConfig c = small_config();
    if (which == 0) c.kv.block_size = 0;
    if (which == 1) c.scheduler.max_num_seqs = 0;
    if (which == 2) c.scheduler.max_num_batched_tokens = 0;
    if (which == 3) c.kv.num_blocks = 0;
    auto engine = Engine::create(c, model);
    EXPECT_FALSE(engine.ok()) << which;
    if (!engine.ok()) {
      EXPECT_FALSE(engine.error().message.empty());
    }
  }
}

TEST(Engine, KvCacheMemorySizesThePool) {
  FakeModel model;  // 8 bytes per position, 48 per state slot
  EngineConfig c = small_config();
  c.kv_cache_memory = 64 * 48 + 100 * 32;  // 64 slots + 100 blocks of 4 positions
  auto engine = Engine::create(c, model);
  ASSERT_TRUE(engine.ok());
  EXPECT_EQ(engine.value()->config().kv.num_blocks, 100);
  c.kv_cache_memory = 100;
  auto too_small = Engine::create(c, model);
  ASSERT_FALSE(too_small.ok());
  EXPECT_NE(too_small.error().message.find("too small"), std::string::npos);
}

TEST(Engine, MetricsCountTokensAndLatencies) {
  FakeModel model;
  EngineMetrics m;
  const auto requests = mixed_requests(10, 6);
  run(small_config(), model, requests, &m);
  int64_t generated = 0;
  FakeModel model2;
  for (const auto& ids : run(small_config(), model2, requests)) generated += ids.size();
  EXPECT_EQ(m.generated_tokens, generated);
  EXPECT_EQ(m.ttft.count, 10u);
  EXPECT_EQ(m.tpot.count, static_cast<uint64_t>(generated - 10));
  EXPECT_GT(m.tokens_per_second, 0.0);
  EXPECT_EQ(m.kv_blocks_total, 512);
}

}  // namespace
}  // namespace deepinfer::engine
