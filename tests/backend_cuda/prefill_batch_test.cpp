// CudaModel::prefill_batch: prompts of several slots packed into shared launches (split where a
// launch is full) give each prompt's last logits as prefilling it alone does, and leave the slots
// where a lone prefill leaves them (the next decode agrees). Emulated: every kernel body computes
// each row alone, so the logits must be the same bits; on the device within the fixture bar.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../model/fixture_util.h"
#include "backend/cuda/cuda_model.h"

namespace deepinfer::cuda {
namespace {

void check_batch_equals_alone(bool emulate) {
  CudaModelOptions o;
  o.emulate = emulate;
  o.max_sequences = 3;
  o.max_context = 256;
  o.max_chunk_tokens = 24;  // the 5 + 30 + 9 tokens take two launches; prompt 1 is split
  auto loaded = CudaModel::load(model::testing::fixture_dir("hf_v4_a"), o);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  CudaModel& m = *loaded.value();
  const int64_t V = m.config().vocab_size;
  std::vector<std::vector<int32_t>> prompts = {{}, {}, {}};
  const int lens[3] = {5, 30, 9};
  for (int p = 0; p < 3; ++p) {
    for (int i = 0; i < lens[p]; ++i)
      prompts[p].push_back(static_cast<int32_t>((7 + 31 * i + 101 * p) % V));
  }
  const std::vector<int> seqs = {0, 1, 2};
  std::vector<std::span<const int32_t>> spans(prompts.begin(), prompts.end());
  std::vector<float> batched(3 * V), alone(3 * V), next_b(3 * V), next_a(3 * V);
  for (int s : seqs) m.reset(s);
  ASSERT_TRUE(m.prefill_batch(seqs, spans, batched.data()).ok());
  const std::vector<int32_t> step = {3, 4, 5};
  ASSERT_TRUE(m.decode(seqs, step, next_b.data(), nullptr).ok());
  for (int p = 0; p < 3; ++p) {
    m.reset(p);
    const int64_t last = lens[p] - 1;
    ASSERT_TRUE(
        m.prefill(p, prompts[p], std::span<const int64_t>(&last, 1), alone.data() + p * V).ok());
    EXPECT_EQ(m.position(p), lens[p]);
  }
  ASSERT_TRUE(m.decode(seqs, step, next_a.data(), nullptr).ok());
  const float bar = emulate ? 0.0f : 1e-3f;
  float worst = 0, worst_next = 0;
  for (size_t i = 0; i < batched.size(); ++i) {
    worst = std::max(worst, std::fabs(batched[i] - alone[i]));
    worst_next = std::max(worst_next, std::fabs(next_b[i] - next_a[i]));
  }
  EXPECT_LE(worst, bar);
  EXPECT_LE(worst_next, bar);
  EXPECT_FALSE(std::isnan(worst) || std::isnan(worst_next));
}

TEST(CudaEmulated, PrefillBatchEqualsOnePromptAtATime) { check_batch_equals_alone(true); }

TEST(CudaDeviceBatch, PrefillBatchEqualsOnePromptAtATime) {
  if (!device_available()) GTEST_SKIP() << device_name();
  check_batch_equals_alone(false);
}

}  // namespace
}  // namespace deepinfer::cuda
