// The engine over the V4.1 CUDA runner (engine/cuda/cuda_v41_model_runner.h) on
// official_v41_c_bf16: concurrent greedy requests whose prompts arrive in chunks give the ids of
// CudaV41Model run on each request alone (prefill, then one decode per token), and the slot byte
// counts equal the device allocation. Emulated: the kernel bodies on the host.
#include <gtest/gtest.h>

#include <random>

#include "../model/fixture_util.h"
#include "backend/cuda/cuda_model.h"
#include "engine/batch.h"
#include "engine/cuda/cuda_v41_model_runner.h"
#include "model/v41_model.h"

namespace deepinfer::engine {
namespace {

using model::testing::argmax;
using model::v41::V41Model;

constexpr int64_t kContext = 128;

V41Model& cpu_model() {
  static V41Model* m = [] {
    auto r = V41Model::load(model::testing::fixture_dir("official_v41_c_bf16"), {1});
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(r.value()).release() : nullptr;
  }();
  return *m;
}

// One request alone on a fresh CudaV41Model: greedy ids.
std::vector<int32_t> alone(const std::vector<int32_t>& prompt, int n) {
  cuda::CudaModelOptions o;
  o.emulate = true;
  o.max_context = kContext;
  auto m = cuda::CudaV41Model::from_model(cpu_model(), o);
  EXPECT_TRUE(m.ok());
  const int V = cpu_model().config().vocab_size;
  std::vector<float> lg(static_cast<size_t>(V));
  const int64_t last = static_cast<int64_t>(prompt.size()) - 1;
  EXPECT_TRUE(m.value()->prefill(0, prompt, std::span<const int64_t>(&last, 1), lg.data()).ok());
  std::vector<int32_t> ids;
  const int seq[] = {0};
  for (int i = 0; i < n; ++i) {
    ids.push_back(argmax(lg.data(), V));
    if (i + 1 < n) {
      EXPECT_TRUE(m.value()->decode(seq, std::span(&ids.back(), 1), lg.data(), nullptr).ok());
    }
  }
  return ids;
}

TEST(CudaV41RunnerEmulated, GreedyEqualsTheModelAlone) {
  EngineConfig c;
  c.kv.block_size = 16;
  c.kv.num_blocks = 64;
  c.scheduler.max_num_seqs = 3;
  c.scheduler.max_num_batched_tokens = 32;  // prompts arrive in several chunks
  c.scheduler.max_model_len = kContext;
  CudaRunnerOptions o;
  o.max_context = kContext;
  o.emulate = true;
  CudaV41ModelRunner runner(cpu_model(), o);
  std::mt19937 rng(5);
  std::vector<EngineRequest> reqs;
  for (int len : {7, 30, 45}) {
    EngineRequest r;
    for (int k = 0; k < len; ++k) r.prompt.push_back(3 + static_cast<int32_t>(rng() % 500));
    r.params.max_tokens = 6;
    r.params.ignore_eos = true;
    r.params.temperature = 0.0f;
    reqs.push_back(std::move(r));
  }
  auto engine = Engine::create(c, runner);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  const auto out = generate_batch(*engine.value(), reqs);
  ASSERT_EQ(out.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_TRUE(out[i].error.empty()) << out[i].error;
    EXPECT_EQ(out[i].ids, alone(reqs[i].prompt, 6)) << "request " << i;
  }
  // The slots' device bytes are what the engine was told.
  const int64_t slot = cuda::cuda_v41_slot_bytes(cpu_model().config(), kContext).total();
  EXPECT_EQ(runner.cuda_model()->state_bytes(), 3 * slot);
  EXPECT_EQ(runner.bytes_per_slot(), cuda::cuda_v41_slot_bytes(cpu_model().config(), 1).bounded);
}

// On the GPU: decode tokens drawn on the device (greedy, temperature, top-k + top-p, min_p) are
// the tokens the engine's Sampler draws from the same runner's logits (device sampling off).
TEST(CudaV41RunnerDevice, DeviceSamplingEqualsHostSampling) {
  if (!cuda::device_available()) GTEST_SKIP() << cuda::device_name();
  EngineConfig c;
  c.kv.block_size = 16;
  c.kv.num_blocks = 64;
  c.scheduler.max_num_seqs = 4;
  c.scheduler.max_num_batched_tokens = 64;
  c.scheduler.max_model_len = kContext;
  std::mt19937 rng(9);
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 4; ++i) {
    EngineRequest r;
    for (int k = 0; k < 9 + 11 * i; ++k) r.prompt.push_back(3 + static_cast<int32_t>(rng() % 500));
    r.params.max_tokens = 10;
    r.params.ignore_eos = true;
    r.params.seed = 40 + static_cast<uint64_t>(i);
    r.params.temperature = i == 0 ? 0.0f : 0.9f;
    r.params.top_k = i == 2 ? 30 : 0;
    r.params.top_p = i == 2 ? 0.9f : 1.0f;
    r.params.min_p = i == 3 ? 0.02f : 0.0f;
    reqs.push_back(std::move(r));
  }
  std::vector<std::vector<int32_t>> ids[2];
  for (bool device : {true, false}) {
    CudaRunnerOptions o;
    o.max_context = kContext;
    o.device_sampling = device;
    CudaV41ModelRunner runner(cpu_model(), o);
    EXPECT_EQ(runner.samples_on_device(), device);
    auto engine = Engine::create(c, runner);
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    for (BatchResult& r : generate_batch(*engine.value(), reqs)) {
      EXPECT_TRUE(r.error.empty()) << r.error;
      ids[device].push_back(std::move(r.ids));
    }
  }
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(ids[1][i], ids[0][i]) << "request " << i;
}

}  // namespace
}  // namespace deepinfer::engine
