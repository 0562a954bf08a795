// The engine over the CUDA runner (engine/cuda/cuda_model_runner.h) on the tiny HF fixture
// hf_v4_a: greedy ids equal the engine over the CPU runner (logprobs within the CUDA fixtures'
// 1e-3 bar) for concurrent requests of different lengths; abort frees the slot; preemption +
// recompute resumes to the same output; a prefix-cache hit (snapshot restore, entries read from
// shared blocks) equals a cold prefill, also for concurrent requests sharing blocks while they
// extend them; CudaModel::copy_slot continues exactly as the original; the KV byte counts equal
// the device allocation. Emulated tests run the kernel bodies on the host (bitwise checks);
// Device tests repeat the engine checks on the GPU and skip without one.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>

#include "engine/batch.h"
#include "engine/cuda/cuda_model_runner.h"
#include "engine/v4_model_runner.h"
#include "model/model.h"
#include "model/safetensors.h"

namespace deepinfer::engine {
namespace {

const std::string kFixture = std::string(DEEPINFER_SOURCE_DIR) + "/tests/fixtures/hf_v4_a";
constexpr int64_t kContext = 160;

model::Model& cpu_model() {
  static model::Model* m = [] {
    auto r = model::Model::load(kFixture, {1});
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(r.value()).release() : nullptr;
  }();
  return *m;
}

std::vector<int32_t> reference_ids(const std::string& name) {
  auto file = model::SafetensorsFile::open(kFixture + "/reference.safetensors");
  if (!file.ok()) return {};
  const model::TensorInfo& t = file.value()->tensors().at(name);
  std::vector<int32_t> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.data, v.size() * 4);
  return v;
}

EngineConfig config(int seqs = 4) {
  EngineConfig c;
  c.kv.block_size = 16;
  c.kv.num_blocks = 64;
  c.scheduler.max_num_seqs = seqs;
  c.scheduler.max_num_batched_tokens = 32;  // prompts arrive in several chunks
  c.scheduler.max_model_len = kContext;
  c.scheduler.eos_token_ids = {1};
  return c;
}

CudaRunnerOptions runner_options(bool emulate) {
  CudaRunnerOptions o;
  o.max_context = kContext;
  o.max_chunk_tokens = 64;
  o.emulate = emulate;
  return o;
}

// Requests of different prompt lengths; greedy unless `sampled` (then seeded, top-p).
std::vector<EngineRequest> requests(const std::vector<int>& lengths, int max_tokens,
                                    bool sampled = false) {
  std::mt19937 rng(7);
  std::vector<EngineRequest> out;
  for (size_t i = 0; i < lengths.size(); ++i) {
    EngineRequest r;
    for (int k = 0; k < lengths[i]; ++k) r.prompt.push_back(3 + static_cast<int32_t>(rng() % 1270));
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    r.params.temperature = sampled && i % 2 ? 0.8f : 0.0f;
    r.params.top_p = 0.95f;
    r.params.seed = 100 + i;
    r.params.logprobs = true;
    r.params.top_logprobs = 2;
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<BatchResult> run(ModelRunner& runner, const EngineConfig& c,
                             const std::vector<EngineRequest>& reqs,
                             EngineMetrics* metrics = nullptr) {
  auto engine = Engine::create(c, runner);
  EXPECT_TRUE(engine.ok()) << (engine.ok() ? "" : engine.error().message);
  if (!engine.ok()) return {};
  auto out = generate_batch(*engine.value(), reqs);
  if (metrics) *metrics = engine.value()->metrics();
  return out;
}

std::vector<BatchResult> run_cuda(bool emulate, const EngineConfig& c,
                                  const std::vector<EngineRequest>& reqs,
                                  EngineMetrics* metrics = nullptr) {
  CudaModelRunner runner(cpu_model(), runner_options(emulate));
  return run(runner, c, reqs, metrics);
}

// Same ids; logprobs within `tol` (0: bitwise). Returns the largest logprob difference.
float expect_close(const BatchResult& got, const BatchResult& want, float tol,
                   const std::string& what) {
  EXPECT_TRUE(got.error.empty()) << what << ": " << got.error;
  EXPECT_EQ(got.ids, want.ids) << what;
  EXPECT_EQ(got.logprobs.size(), want.logprobs.size()) << what;
  if (got.ids != want.ids || got.logprobs.size() != want.logprobs.size()) return INFINITY;
  float worst = 0.0f;
  for (size_t i = 0; i < got.logprobs.size(); ++i) {
    const float a = got.logprobs[i].logprob, b = want.logprobs[i].logprob;
    if (tol == 0.0f) {
      EXPECT_EQ(std::memcmp(&a, &b, 4), 0) << what << " token " << i;
    }
    worst = std::max(worst, std::fabs(a - b));
    EXPECT_EQ(got.logprobs[i].num_top, want.logprobs[i].num_top);
    for (int k = 0; k < std::min(got.logprobs[i].num_top, want.logprobs[i].num_top); ++k)
      worst = std::max(worst,
                       std::fabs(got.logprobs[i].top[k].logprob - want.logprobs[i].top[k].logprob));
  }
  if (tol > 0.0f) {
    EXPECT_LE(worst, tol) << what;
  }
  return worst;
}

void greedy_equals_cpu(bool emulate) {
  auto reqs = requests({5, 23, 40, 61}, 6);
  // And HF's greedy continuation of the fixture's prompt (its first 12 tokens).
  EngineRequest hf;
  hf.prompt = reference_ids("greedy_prompt");
  std::vector<int32_t> hf_out = reference_ids("greedy_out");
  ASSERT_GE(hf_out.size(), 12u);
  hf_out.resize(12);
  hf.params.max_tokens = 12;
  hf.params.ignore_eos = true;
  hf.params.temperature = 0.0f;
  hf.params.logprobs = true;
  reqs.push_back(hf);
  V4ModelRunner cpu(cpu_model());
  const auto want = run(cpu, config(), reqs);
  const auto t0 = std::chrono::steady_clock::now();
  const auto got = run_cuda(emulate, config(), reqs);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  %zu requests (%s): %.2f s\n", reqs.size(), emulate ? "emulated" : "device", s);
  ASSERT_EQ(got.size(), reqs.size());
  float worst = 0.0f;
  for (size_t i = 0; i < reqs.size(); ++i)
    worst = std::max(worst, expect_close(got[i], want[i], 1e-3f, "request " + std::to_string(i)));
  EXPECT_EQ(got.back().ids, hf_out);
  std::printf("  CUDA runner vs CPU runner: ids equal, logprobs max-abs %.3g\n", worst);
}

void preemption_resumes(bool emulate) {
  const auto reqs = requests({20, 34, 9}, 10, /*sampled=*/true);
  EngineConfig tight = config();
  tight.kv.num_blocks = 5;  // 80 positions for three requests of up to 44
  EngineMetrics metrics;
  const auto got = run_cuda(emulate, tight, reqs, &metrics);
  EXPECT_GT(metrics.num_preemptions, 0);
  const auto calm = run_cuda(emulate, config(), reqs);
  // Emulated: the host kernel bodies give every row the same bits whatever the batch. On the
  // device the decode batch size picks the matrix kernel, so only ids and a tolerance hold.
  for (size_t i = 0; i < reqs.size(); ++i)
    expect_close(got[i], calm[i], emulate ? 0.0f : 1e-3f, "request " + std::to_string(i));
}

// A shared 40-token prefix (two full blocks of 16, and entries of both ratios' stores).
std::vector<int32_t> shared_prefix() {
  std::vector<int32_t> v;
  for (int i = 0; i < 40; ++i) v.push_back(100 + 7 * i);
  return v;
}

// A request that hits the prefix cache (restoring the snapshot at the end of the last hit block
// and reading the hit blocks' entries) gives the bits of a cold prefill of the same prompt.
void prefix_hit_equals_cold(bool emulate) {
  auto reqs = requests({12, 10}, 10, /*sampled=*/true);
  const std::vector<int32_t> shared = shared_prefix();
  for (auto& r : reqs) r.prompt.insert(r.prompt.begin(), shared.begin(), shared.end());
  CudaModelRunner runner(cpu_model(), runner_options(emulate));
  EXPECT_TRUE(runner.exact_prefix_snapshots());
  auto engine = Engine::create(config(), runner);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  const BatchResult first = generate_batch(*engine.value(), {reqs[0]})[0];
  const BatchResult warm = generate_batch(*engine.value(), {reqs[1]})[0];
  const BatchResult again = generate_batch(*engine.value(), {reqs[0]})[0];
  const EngineMetrics m = engine.value()->metrics();
  EXPECT_EQ(first.usage.prompt_cache_hit_tokens, 0);
  EXPECT_EQ(warm.usage.prompt_cache_hit_tokens, 32);   // two blocks of 16 of the shared 40
  EXPECT_EQ(again.usage.prompt_cache_hit_tokens, 48);  // its own prompt's three full blocks
  EXPECT_GT(m.prefix_hit_rate, 0.0);
  EXPECT_GT(m.prefix_hit_tokens, 0);
  const float tol = emulate ? 0.0f : 1e-3f;
  expect_close(warm, run_cuda(emulate, config(), {reqs[1]})[0], tol, "prefix hit");
  expect_close(again, first, tol, "hit on its own prompt");
  // And the CPU engine, without a prefix cache, gives the same ids.
  EngineConfig off = config();
  off.kv.prefix_caching = false;
  V4ModelRunner cpu(cpu_model());
  expect_close(warm, run(cpu, off, {reqs[1]})[0], 1e-3f, "prefix hit vs the CPU engine");
}

// Two concurrent requests hit the same cached blocks; one of them extends the prefix past the
// ratio-128 HCA entry 0 and many CSA entries, writing only its own blocks. Both equal their cold
// runs, and the blocks stay intact for a third request that hits them afterwards.
void shared_blocks_concurrent(bool emulate) {
  auto reqs = requests({10, 100, 10}, 8, /*sampled=*/true);
  const std::vector<int32_t> shared = shared_prefix();
  for (auto& r : reqs) r.prompt.insert(r.prompt.begin(), shared.begin(), shared.end());
  CudaModelRunner runner(cpu_model(), runner_options(emulate));
  auto engine = Engine::create(config(), runner);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  generate_batch(*engine.value(), {reqs[2]});  // publishes the shared blocks
  const auto both = generate_batch(*engine.value(), {reqs[0], reqs[1]});
  const BatchResult later = generate_batch(*engine.value(), {reqs[2]})[0];
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].usage.prompt_cache_hit_tokens, 32);
  EXPECT_EQ(both[1].usage.prompt_cache_hit_tokens, 32);
  EXPECT_EQ(later.usage.prompt_cache_hit_tokens, 48);
  const float tol = emulate ? 0.0f : 1e-3f;
  for (size_t i = 0; i < 2; ++i)
    expect_close(both[i], run_cuda(emulate, config(), {reqs[i]})[0], tol,
                 "concurrent hit " + std::to_string(i));
  expect_close(later, run_cuda(emulate, config(), {reqs[2]})[0], tol, "hit after the others");
}

void abort_frees_the_slot(bool emulate) {
  CudaModelRunner runner(cpu_model(), runner_options(emulate));
  auto engine = Engine::create(config(1), runner);  // one slot
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  auto reqs = requests({30, 12}, 8);
  reqs[0].params.max_tokens = 100;
  std::mutex mu;
  std::condition_variable cv;
  int tokens = 0;
  bool ended = false;
  auto id = engine.value()->submit(reqs[0], [&](const RequestEvent& ev) {
    std::lock_guard lock(mu);
    if (ev.finish != FinishReason::kNone)
      ended = true;
    else
      ++tokens;
    cv.notify_all();
  });
  ASSERT_TRUE(id.ok());
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return tokens >= 2 || ended; });
  }
  engine.value()->abort(id.value());
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return ended; });
  }
  // The slot (and every block) is free again, and its next user starts from a clean state.
  const BatchResult after = generate_batch(*engine.value(), {reqs[1]})[0];
  const EngineMetrics m = engine.value()->metrics();
  EXPECT_EQ(m.kv_blocks_used, 0);
  EXPECT_EQ(m.num_running, 0);
  const BatchResult fresh = run_cuda(emulate, config(1), {reqs[1]})[0];
  expect_close(after, fresh, 0.0f, "after the abort");
}

// Several requests whose prompts arrive in the same step (their pieces go through one
// prefill_batch per round, split across 64-row launches) equal the one-prefill-per-sequence
// runner (emulated: bitwise) and the CPU engine; also when they hit the prefix cache together,
// and under preemption. `batched` vs `alone` differ only in CudaRunnerOptions::batch_prefill.
std::vector<BatchResult> run_cuda_batching(bool emulate, bool batch, const EngineConfig& c,
                                           const std::vector<EngineRequest>& reqs,
                                           EngineMetrics* metrics = nullptr) {
  CudaRunnerOptions o = runner_options(emulate);
  o.batch_prefill = batch;
  CudaModelRunner runner(cpu_model(), o);
  return run(runner, c, reqs, metrics);
}

EngineConfig one_step_config() {
  EngineConfig c = config(6);
  c.scheduler.max_num_batched_tokens = 512;  // every prompt's first piece in the first step
  return c;
}

void batched_prefill_equals_alone(bool emulate) {
  const auto reqs = requests({5, 23, 40, 61, 17, 33}, 6, /*sampled=*/true);
  const float tol = emulate ? 0.0f : 1e-3f;
  for (bool caching : {true, false}) {
    EngineConfig c = one_step_config();
    c.kv.prefix_caching = caching;
    EngineMetrics m;
    const auto batched = run_cuda_batching(emulate, true, c, reqs, &m);
    const auto alone = run_cuda_batching(emulate, false, c, reqs);
    V4ModelRunner cpu(cpu_model());
    const auto want = run(cpu, c, reqs);
    ASSERT_EQ(batched.size(), reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      const std::string what = "request " + std::to_string(i) + (caching ? " (prefix cache)" : "");
      expect_close(batched[i], alone[i], tol, what + " batched vs alone");
      expect_close(batched[i], want[i], 1e-3f, what + " vs the CPU engine");
    }
  }
}

void batched_prefill_with_prefix_hits(bool emulate) {
  auto reqs = requests({12, 30, 3, 50}, 8, /*sampled=*/true);
  const std::vector<int32_t> shared = shared_prefix();
  for (auto& r : reqs) r.prompt.insert(r.prompt.begin(), shared.begin(), shared.end());
  const float tol = emulate ? 0.0f : 1e-3f;
  std::vector<std::vector<BatchResult>> outs;
  for (bool batch : {true, false}) {
    CudaRunnerOptions o = runner_options(emulate);
    o.batch_prefill = batch;
    CudaModelRunner runner(cpu_model(), o);
    auto engine = Engine::create(one_step_config(), runner);
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    generate_batch(*engine.value(), {reqs[0]});              // publishes the shared blocks
    const auto all = generate_batch(*engine.value(), reqs);  // all four hit, in one step
    ASSERT_EQ(all.size(), reqs.size());
    EXPECT_EQ(all[0].usage.prompt_cache_hit_tokens, 48);  // its own three full blocks
    for (size_t i = 1; i < reqs.size(); ++i) EXPECT_EQ(all[i].usage.prompt_cache_hit_tokens, 32);
    outs.push_back(all);
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    const std::string what = "hit " + std::to_string(i);
    expect_close(outs[0][i], outs[1][i], tol, what + " batched vs alone");
    expect_close(outs[0][i], run_cuda_batching(emulate, false, one_step_config(), {reqs[i]})[0],
                 tol, what + " vs a cold run");
  }
}

void batched_prefill_with_preemption(bool emulate) {
  const auto reqs = requests({20, 34, 9, 27}, 10, /*sampled=*/true);
  EngineConfig tight = one_step_config();
  tight.kv.num_blocks = 6;  // 96 positions for four requests of up to 44
  EngineMetrics metrics;
  const auto got = run_cuda_batching(emulate, true, tight, reqs, &metrics);
  EXPECT_GT(metrics.num_preemptions, 0);
  const auto calm = run_cuda_batching(emulate, false, one_step_config(), reqs);
  for (size_t i = 0; i < reqs.size(); ++i)
    expect_close(got[i], calm[i], emulate ? 0.0f : 1e-3f, "request " + std::to_string(i));
}

// ---- emulated (host) runs of the kernel bodies: no GPU needed ----

TEST(CudaRunnerEmulated, BatchedPrefillEqualsOneAtATime) { batched_prefill_equals_alone(true); }
TEST(CudaRunnerEmulated, BatchedPrefillWithPrefixHits) { batched_prefill_with_prefix_hits(true); }
TEST(CudaRunnerEmulated, BatchedPrefillWithPreemption) { batched_prefill_with_preemption(true); }

TEST(CudaRunnerEmulated, GreedyEqualsTheCpuEngine) { greedy_equals_cpu(true); }
TEST(CudaRunnerEmulated, PreemptionResumesToTheSameOutput) { preemption_resumes(true); }
TEST(CudaRunnerEmulated, AbortFreesTheSlot) { abort_frees_the_slot(true); }

TEST(CudaRunnerEmulated, PrefixHitEqualsAColdPrefillBitwise) { prefix_hit_equals_cold(true); }
TEST(CudaRunnerEmulated, ConcurrentRequestsShareBlocksBitwise) { shared_blocks_concurrent(true); }

// The device KV state is what the runner reports: slots of bounded state, and blocks of entries
// (plus a bounded-state snapshot each with prefix caching).
TEST(CudaRunnerEmulated, ReportsTheDeviceKvBytes) {
  const cuda::CudaKvBytes b = cuda::cuda_kv_bytes(cpu_model().config(), 16);
  for (bool caching : {true, false}) {
    CudaRunnerOptions o = runner_options(true);
    o.prefix_caching = caching;
    CudaModelRunner runner(cpu_model(), o);
    const KvCacheConfig kv{.num_blocks = 8, .block_size = 16, .num_state_slots = 3};
    ASSERT_TRUE(runner.allocate(kv).ok());
    EXPECT_EQ(runner.bytes_per_slot(), b.bounded);
    EXPECT_EQ(runner.bytes_per_block(16), b.block_entries + (caching ? b.bounded : 0));
    EXPECT_EQ(runner.cuda_model()->state_bytes(), 3 * b.bounded + 8 * runner.bytes_per_block(16));
    EXPECT_EQ(runner.exact_prefix_snapshots(), caching);
    EXPECT_EQ(runner.cuda_model()->num_blocks(), 8);
    EXPECT_FALSE(runner.allocate(kv).ok());  // once only
  }
  // Per store max(1, 16 / ratio) rows a block: ratio-4 CSA entries (head_dim) and index keys
  // (index_head_dim), one ratio-128 HCA row (head_dim), fp32.
  const model::ModelConfig& c = cpu_model().config();
  int64_t want = 0;
  for (int i = 0; i < c.num_layers; ++i) {
    if (c.ratio(i) == 4) want += 4 * (c.head_dim + c.index_head_dim) * 4;
    if (c.ratio(i) == 128) want += c.head_dim * 4;
  }
  EXPECT_EQ(b.block_entries, want);
}

TEST(CudaRunnerEmulated, PlanFitsTheBudget) {
  const model::ModelConfig& c = cpu_model().config();
  const cuda::CudaKvBytes b = cuda::cuda_kv_bytes(c, 16);
  auto open = plan_cuda_kv(c, 0, 4, 1000, 16, true);
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(open.value().max_context, 1000);
  EXPECT_EQ(open.value().num_blocks, 4 * 63);  // ceil(1000 / 16) blocks per slot
  EXPECT_EQ(open.value().block_bytes, b.block_entries + b.bounded);
  EXPECT_EQ(open.value().state_bytes, 4 * b.bounded + 4 * 63 * open.value().block_bytes);
  // A budget sizes the block pool (not slots of max_context positions).
  const int64_t budget = 4 * b.bounded + 100 * b.block_entries + 5;
  auto fit = plan_cuda_kv(c, budget, 4, 1000, 16, false);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit.value().num_blocks, 100);
  EXPECT_EQ(fit.value().max_context, 1000);
  EXPECT_LE(fit.value().state_bytes, budget);
  auto small = plan_cuda_kv(c, 4 * b.bounded + 10 * b.block_entries, 4, 1000, 16, false);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small.value().max_context, 160);  // what 10 blocks hold
  auto tiny = plan_cuda_kv(c, 1000, 4, 1000, 16, true);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.error().message.find("too small"), std::string::npos) << tiny.error().message;
}

TEST(CudaRunnerEmulated, RejectsWhatItCannotRun) {
  CudaModelRunner runner(cpu_model(), runner_options(true));
  const std::vector<int32_t> ids = {5, 6, 7}, table = {0};
  RunnerSequence seq;
  seq.tokens = ids;
  seq.block_table = table;
  seq.fresh = true;
  EXPECT_FALSE(runner.execute(std::span(&seq, 1), {}).ok());  // before allocate()
  ASSERT_TRUE(runner.allocate({.num_blocks = 4, .block_size = 16, .num_state_slots = 2}).ok());
  seq.slot = 2;
  EXPECT_FALSE(runner.execute(std::span(&seq, 1), {}).ok());  // no such slot
  seq.slot = 0;
  seq.start = 16;  // a prefix hit, but the table does not cover the step
  EXPECT_FALSE(runner.execute(std::span(&seq, 1), {}).ok());
  seq.start = 8;  // a prefix hit off a block boundary
  EXPECT_FALSE(runner.execute(std::span(&seq, 1), {}).ok());
  seq.fresh = false;
  seq.start = 5;  // the slot is at position 0
  EXPECT_FALSE(runner.execute(std::span(&seq, 1), {}).ok());
  // Blocks must divide every compress ratio or be a multiple of it (4 and 128 here).
  CudaModelRunner odd(cpu_model(), runner_options(true));
  EXPECT_FALSE(odd.allocate({.num_blocks = 4, .block_size = 12, .num_state_slots = 2}).ok());
}

// copy_slot, then one decode in both slots: the copy continues exactly as the original.
TEST(CudaRunnerEmulated, CopySlotContinuesAsTheOriginal) {
  cuda::CudaModelOptions o;
  o.emulate = true;
  o.max_sequences = 3;
  o.max_context = 64;
  auto m = cuda::CudaModel::from_model(cpu_model(), o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  cuda::CudaModel& g = *m.value();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 37; ++i) prompt.push_back(10 + 31 * i % 1200);  // past a ratio-4 entry
  ASSERT_TRUE(g.prefill(0, prompt, {}, nullptr).ok());
  const std::vector<int32_t> junk = {9, 8, 7, 6, 5};
  ASSERT_TRUE(g.prefill(2, junk, {}, nullptr).ok());  // dst holds something else first
  ASSERT_TRUE(g.copy_slot(0, 2).ok());
  EXPECT_EQ(g.position(2), 37);
  const int64_t V = g.config().vocab_size;
  std::vector<float> both(2 * static_cast<size_t>(V)), alone(static_cast<size_t>(V));
  const int seqs[] = {0, 2};
  const int32_t tok[] = {42, 42};
  ASSERT_TRUE(g.decode(seqs, tok, both.data(), nullptr).ok());
  EXPECT_EQ(std::memcmp(both.data(), both.data() + V, V * sizeof(float)), 0);
  // The original alone (slot 1 prefilled from scratch) gives the same row.
  ASSERT_TRUE(g.prefill(1, prompt, {}, nullptr).ok());
  const int one[] = {1};
  const int32_t tok1[] = {42};
  ASSERT_TRUE(g.decode(one, tok1, alone.data(), nullptr).ok());
  EXPECT_EQ(std::memcmp(both.data(), alone.data(), V * sizeof(float)), 0);
  EXPECT_FALSE(g.copy_slot(0, 3).ok());
  EXPECT_FALSE(g.copy_slot(-1, 0).ok());
}

// ---- on the device ----

class CudaRunnerDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::device_available()) GTEST_SKIP() << cuda::device_name();
  }
};

TEST_F(CudaRunnerDevice, GreedyEqualsTheCpuEngine) { greedy_equals_cpu(false); }
TEST_F(CudaRunnerDevice, PreemptionResumesToTheSameOutput) { preemption_resumes(false); }
TEST_F(CudaRunnerDevice, AbortFreesTheSlot) { abort_frees_the_slot(false); }
TEST_F(CudaRunnerDevice, PrefixHitEqualsAColdPrefill) { prefix_hit_equals_cold(false); }
TEST_F(CudaRunnerDevice, ConcurrentRequestsShareBlocks) { shared_blocks_concurrent(false); }
TEST_F(CudaRunnerDevice, BatchedPrefillEqualsOneAtATime) { batched_prefill_equals_alone(false); }
TEST_F(CudaRunnerDevice, BatchedPrefillWithPrefixHits) { batched_prefill_with_prefix_hits(false); }
TEST_F(CudaRunnerDevice, BatchedPrefillWithPreemption) { batched_prefill_with_preemption(false); }

// Runner-level prefill time of N concurrent prompts (one step each round), batched vs one
// prefill per sequence, on this fixture: prints the numbers (the bench notes them).
TEST_F(CudaRunnerDevice, BatchedPrefillTiming) {
  for (int n : {16, 64}) {
    for (bool caching : {true, false}) {
      EngineConfig c = config(n);
      c.kv.num_blocks = n * 10;
      c.kv.prefix_caching = caching;
      c.scheduler.max_num_batched_tokens = 8192;
      std::vector<int> lens(static_cast<size_t>(n), 150);
      auto reqs = requests(lens, 1);
      for (auto& r : reqs) r.params.logprobs = false, r.params.top_logprobs = 0;
      double t[2] = {0, 0};
      for (int rep = 0; rep < 2; ++rep) {  // the first rep warms up
        for (int batch : {1, 0}) {
          CudaRunnerOptions o = runner_options(false);
          o.max_chunk_tokens = 512;
          o.batch_prefill = batch;
          CudaModelRunner runner(cpu_model(), o);
          auto engine = Engine::create(c, runner);  // the upload, outside the timing
          ASSERT_TRUE(engine.ok()) << engine.error().message;
          const auto t0 = std::chrono::steady_clock::now();
          const auto out = generate_batch(*engine.value(), reqs);
          t[batch] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          ASSERT_EQ(out.size(), reqs.size());
          EXPECT_TRUE(out[0].error.empty()) << out[0].error;
        }
      }
      std::printf("  %d x 150 tokens, prefix cache %s: batched %.3f s, one per sequence %.3f s\n",
                  n, caching ? "on" : "off", t[1], t[0]);
    }
  }
}

// Requests without logprobs or penalties draw their decode tokens on the GPU (greedy, temperature
// alone, top-k + top-p, min_p): the same tokens as the CPU engine's Sampler over its own logits.
TEST_F(CudaRunnerDevice, DeviceSamplingEqualsTheCpuEngine) {
  auto reqs = requests({5, 23, 40, 61, 17, 33}, 12);
  for (size_t i = 0; i < reqs.size(); ++i) {
    SamplingParams& p = reqs[i].params;
    p.logprobs = false;
    p.top_logprobs = 0;
    p.temperature = i % 3 == 0 ? 0.0f : 0.9f;
    p.top_k = i % 3 == 2 ? 40 : 0;
    p.top_p = i % 3 == 2 ? 0.9f : 1.0f;
    if (i == 4) p.min_p = 0.05f;
    EXPECT_TRUE(device_samplable(p, kDeviceSampleMaxTopK)) << i;
  }
  CudaModelRunner runner(cpu_model(), runner_options(false));
  EXPECT_TRUE(runner.samples_on_device());
  V4ModelRunner cpu(cpu_model());
  const auto want = run(cpu, config(), reqs);
  const auto got = run(runner, config(), reqs);
  ASSERT_EQ(got.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_TRUE(got[i].error.empty()) << got[i].error;
    EXPECT_EQ(got[i].ids, want[i].ids) << "request " << i;
  }
}

// A decode batch of 16 filled by copy_slot: every copy's row equals the original's.
TEST_F(CudaRunnerDevice, CopySlotFillsADecodeBatch) {
  cuda::CudaModelOptions o;
  o.max_sequences = 16;
  o.max_context = 128;
  auto m = cuda::CudaModel::from_model(cpu_model(), o);
  ASSERT_TRUE(m.ok()) << m.error().message;
  cuda::CudaModel& g = *m.value();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 45; ++i) prompt.push_back(10 + 31 * i % 1200);
  ASSERT_TRUE(g.prefill(0, prompt, {}, nullptr).ok());
  for (int s = 1; s < 16; ++s) ASSERT_TRUE(g.copy_slot(0, s).ok());
  const int64_t V = g.config().vocab_size;
  std::vector<float> out(16 * static_cast<size_t>(V));
  std::vector<int> seqs(16);
  std::vector<int32_t> ids(16, 42);
  for (int s = 0; s < 16; ++s) seqs[s] = s;
  ASSERT_TRUE(g.decode(seqs, ids, out.data(), nullptr).ok());
  float worst = 0.0f;
  for (int s = 1; s < 16; ++s)
    for (int64_t v = 0; v < V; ++v) worst = std::max(worst, std::fabs(out[s * V + v] - out[v]));
  EXPECT_EQ(worst, 0.0f);  // the same batch: rows of equal state are equal
}

}  // namespace
}  // namespace deepinfer::engine
