// Device sampling (backend/cuda/sampling.h) against the engine's Sampler on the same logits and
// the same Philox draws: every parameter mix it covers must pick the Sampler's token. Skipped
// without a GPU.
#include "backend/cuda/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "backend/cuda/cuda_model.h"
#include "engine/philox.h"
#include "engine/sampler.h"

namespace deepinfer::cuda {
namespace {

// What the engine would hand the device for these parameters and this token index.
SampleSpec spec_for(const engine::SamplingParams& p, uint64_t seed, uint64_t index) {
  SampleSpec s;
  const bool greedy = p.temperature < 1e-5f;
  s.mode = greedy ? 1 : 2;
  s.inv_temperature = greedy ? 1.0f : 1.0f / p.temperature;
  s.top_k = p.top_k > 0 ? p.top_k : 0;
  s.top_p = p.top_p;
  s.has_min_p = p.min_p > 0.0f;
  s.log_min_p = s.has_min_p ? std::log(p.min_p) : 0.0f;
  s.uniform = engine::philox_uniform(seed, index);
  return s;
}

TEST(CudaSampling, PicksTheSamplersToken) {
  if (!device_available()) GTEST_SKIP() << device_name();
  struct Mix {
    const char* name;
    float temperature, top_p, min_p;
    int32_t top_k;
  };
  const Mix mixes[] = {
      {"greedy", 0.0f, 1.0f, 0.0f, 0},
      {"temperature 1", 1.0f, 1.0f, 0.0f, 0},
      {"temperature 0.7", 0.7f, 1.0f, 0.0f, 0},
      {"min_p 0.05", 1.0f, 1.0f, 0.05f, 0},
      {"top_k 1", 1.0f, 1.0f, 0.0f, 1},
      {"top_k 50", 0.8f, 1.0f, 0.0f, 50},
      {"top_k 50 top_p 0.9", 1.0f, 0.9f, 0.0f, 50},
      {"top_k 2048 top_p 0.95 min_p 0.01", 1.2f, 0.95f, 0.01f, 2048},
  };
  std::mt19937 rng(5);
  for (const int64_t V : {int64_t{129280}, int64_t{3000}}) {
    const int rows_per_mix = V > 10000 ? 24 : 64;
    for (const Mix& m : mixes) {
      engine::SamplingParams p;
      p.temperature = m.temperature;
      p.top_p = m.top_p;
      p.min_p = m.min_p;
      p.top_k = m.top_k;
      std::vector<float> logits(static_cast<size_t>(rows_per_mix * V));
      std::vector<SampleSpec> specs;
      std::vector<int32_t> want;
      engine::Sampler sampler(static_cast<int32_t>(V));
      std::vector<int32_t> output(64, 0);  // its length is the token index of the draw
      for (int r = 0; r < rows_per_mix; ++r) {
        // Logits from flat to peaked; every fourth row rounded to a coarse grid, so ties.
        std::normal_distribution<float> g(0.0f, 0.5f + 0.25f * static_cast<float>(r % 12));
        float* row = logits.data() + static_cast<size_t>(r) * V;
        for (int64_t i = 0; i < V; ++i) {
          row[i] = g(rng);
          if (r % 4 == 3) row[i] = std::round(row[i] * 4.0f) / 4.0f;
        }
        const uint64_t seed = rng(), index = static_cast<uint64_t>(r % 64);
        specs.push_back(spec_for(p, seed, index));
        const engine::SampleContext ctx{p, seed, {}, std::span<const int32_t>(output).first(index)};
        want.push_back(
            sampler.sample(std::span<const float>(row, static_cast<size_t>(V)), ctx).token);
      }
      auto got = sample_on_device(logits, V, specs);
      ASSERT_TRUE(got.ok()) << got.error().message;
      int same = 0;
      for (int r = 0; r < rows_per_mix; ++r) same += got.value()[r] == want[r];
      std::printf("  vocab %lld, %s: %d of %d tokens equal the Sampler's\n",
                  static_cast<long long>(V), m.name, same, rows_per_mix);
      EXPECT_EQ(same, rows_per_mix) << m.name;
    }
  }
}

TEST(CudaSampling, RowsWithoutASpecGetMinusOne) {
  if (!device_available()) GTEST_SKIP() << device_name();
  const std::vector<float> logits(2 * 100, 0.5f);
  std::vector<SampleSpec> specs(2);
  specs[1].mode = 1;
  auto got = sample_on_device(logits, 100, specs);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(got.value()[0], -1);
  EXPECT_EQ(got.value()[1], 0);  // all equal: the lowest id
}

}  // namespace
}  // namespace deepinfer::cuda
