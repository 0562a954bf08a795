// The executor's device-sampling path with a runner that claims samples_on_device(): rows whose
// parameters device_samplable() accepts carry a DeviceSample (greedy flag, parameters and the
// Sampler's own Philox draw for that token) and take the runner's token; the rest (logprobs,
// penalties) are sampled from the logits as before.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "engine/batch.h"
#include "engine/engine.h"
#include "engine/fake_model.h"
#include "engine/philox.h"

namespace deepinfer::engine {
namespace {

constexpr int32_t kDeviceToken = 7;

// The fake model, plus "device" tokens: kDeviceToken for every row with a DeviceSample, after
// checking that its draw is the one the Sampler would make for that request and token.
class DeviceSamplingFake : public FakeModel {
 public:
  using FakeModel::FakeModel;
  bool samples_on_device() const override { return true; }
  Status execute_sampling(std::span<const RunnerSequence> batch, std::span<float> logits,
                          std::span<int32_t> tokens) override {
    if (Status s = execute(batch, logits); !s.ok()) return s;
    size_t row = 0;
    for (const RunnerSequence& seq : batch) {
      if (!seq.want_logits) continue;
      tokens[row] = -1;
      if (const DeviceSample* d = seq.device_sample) {
        const uint64_t index = seq.context.size() - static_cast<size_t>(seq.num_prompt);
        const uint64_t seed = seeds.at(seq.context[0]);  // prompts start with their seed's key
        const double want = d->greedy ? 0.0 : philox_uniform(seed, index);
        if (d->uniform != want) ++wrong_draws;
        tokens[row] = kDeviceToken;
        ++device_rows;
      }
      ++row;
    }
    return Status::Ok();
  }
  std::map<int32_t, uint64_t> seeds;  // prompt's first token → the request's seed
  int device_rows = 0, wrong_draws = 0;
};

TEST(DeviceSampling, EligibleRowsTakeTheRunnersTokenOthersTheSamplers) {
  DeviceSamplingFake model;
  EngineConfig c;
  c.kv.block_size = 4;
  c.kv.num_blocks = 256;
  c.scheduler.max_num_seqs = 16;
  c.scheduler.max_num_batched_tokens = 64;
  c.scheduler.max_model_len = 256;
  c.scheduler.eos_token_ids = {1};
  std::vector<EngineRequest> reqs(4);
  for (int i = 0; i < 4; ++i) {
    reqs[i].prompt = {10 + i, 20, 30};
    reqs[i].params.max_tokens = 6;
    reqs[i].params.seed = 1000 + static_cast<uint64_t>(i);
    reqs[i].params.ignore_eos = true;
    model.seeds[10 + i] = 1000 + static_cast<uint64_t>(i);
  }
  reqs[0].params.temperature = 0.0f;  // greedy: on the device
  reqs[1].params.temperature = 0.8f;  // temperature + top_k + top_p: on the device
  reqs[1].params.top_k = 40;
  reqs[1].params.top_p = 0.9f;
  reqs[2].params.temperature = 0.8f;  // logprobs: on the host
  reqs[2].params.logprobs = true;
  reqs[3].params.temperature = 0.8f;  // a penalty: on the host
  reqs[3].params.frequency_penalty = 0.5f;
  auto engine = Engine::create(c, model);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  const std::vector<BatchResult> out = generate_batch(*engine.value(), reqs);
  ASSERT_EQ(out.size(), 4u);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(out[i].ids.size(), 6u) << i;
  for (int i : {0, 1})
    for (int32_t t : out[i].ids) EXPECT_EQ(t, kDeviceToken) << "request " << i;
  // The host-sampled requests equal the fake's own reference (the Sampler over its logits),
  // which draws kDeviceToken by chance only.
  int host_device_tokens = 0;
  for (int i : {2, 3})
    for (int32_t t : out[i].ids) host_device_tokens += t == kDeviceToken;
  EXPECT_LT(host_device_tokens, 12);
  EXPECT_EQ(out[2].logprobs.size(), 6u);
  EXPECT_EQ(model.device_rows, 12);
  EXPECT_EQ(model.wrong_draws, 0);
}

TEST(DeviceSampling, WhatTheDeviceCovers) {
  SamplingParams p;
  EXPECT_TRUE(device_samplable(p, 2048));  // temperature 1, no top-k / top-p
  p.top_p = 0.9f;
  EXPECT_FALSE(device_samplable(p, 2048));  // top_p needs a top_k on the device
  p.top_k = 100;
  EXPECT_TRUE(device_samplable(p, 2048));
  p.top_k = 4096;
  EXPECT_FALSE(device_samplable(p, 2048));
  p.temperature = 0.0f;  // greedy ignores top_k / top_p
  EXPECT_TRUE(device_samplable(p, 2048));
  p.logprobs = true;
  EXPECT_FALSE(device_samplable(p, 2048));
  p.logprobs = false;
  p.logit_bias = {{3, 1.0f}};
  EXPECT_FALSE(device_samplable(p, 2048));
  p.logit_bias.clear();
  p.repetition_penalty = 1.1f;
  EXPECT_FALSE(device_samplable(p, 2048));
}

}  // namespace
}  // namespace deepinfer::engine
