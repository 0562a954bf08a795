// model::Model::forward_batch (one GEMM per weight for the stacked rows of many sequences) against
// forward() on each sequence alone: bitwise equal logits in batch-invariant mode, on the HF and
// the official fixtures, for 24 sequences of different lengths (more decode rows than one GEMV
// call takes) through prefill and decode steps.
#include <gtest/gtest.h>

#include <bit>
#include <cstdio>
#include <random>
#include <vector>

#include "model/model.h"

namespace deepinfer::model {
namespace {

const std::string kDir = std::string(DEEPINFER_SOURCE_DIR) + "/tests/fixtures/";

struct Seq {
  std::vector<int32_t> prompt;
  std::vector<int32_t> steps;  // decode tokens fed one by one
};

std::vector<Seq> make_seqs(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Seq> out(static_cast<size_t>(n));
  for (Seq& s : out) {
    const int len = 1 + static_cast<int>(rng() % 40);
    for (int k = 0; k < len; ++k) s.prompt.push_back(3 + static_cast<int32_t>(rng() % (vocab - 3)));
    for (int k = 0; k < 4; ++k) s.steps.push_back(3 + static_cast<int32_t>(rng() % (vocab - 3)));
  }
  return out;
}

// Logits after the prompt and after each step, one sequence at a time.
std::vector<std::vector<float>> run_alone(Model& m, const Seq& s) {
  const int vocab = m.config().vocab_size;
  std::vector<std::vector<float>> out;
  SequenceState st = m.new_state();
  const int64_t last = static_cast<int64_t>(s.prompt.size()) - 1;
  out.emplace_back(vocab);
  EXPECT_TRUE(m.forward(st, s.prompt, std::span(&last, 1), out.back().data()).ok());
  const int64_t zero = 0;
  for (int32_t t : s.steps) {
    out.emplace_back(vocab);
    EXPECT_TRUE(m.forward(st, std::span(&t, 1), std::span(&zero, 1), out.back().data()).ok());
  }
  return out;
}

void expect_batched_equals_alone(const std::string& fixture, bool invariant, bool want_equal) {
  auto loaded = Model::load(kDir + fixture, {1, invariant});
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  Model& m = *loaded.value();
  const int vocab = m.config().vocab_size;
  const std::vector<Seq> seqs = make_seqs(24, vocab, 7);
  std::vector<SequenceState> states;
  for (size_t i = 0; i < seqs.size(); ++i) states.push_back(m.new_state());
  std::vector<std::vector<std::vector<float>>> got(seqs.size());
  std::vector<int64_t> last(seqs.size());
  std::vector<BatchSequence> batch;
  for (size_t i = 0; i < seqs.size(); ++i) {
    got[i].emplace_back(vocab);
    last[i] = static_cast<int64_t>(seqs[i].prompt.size()) - 1;
    batch.push_back({&states[i], seqs[i].prompt, std::span(&last[i], 1), got[i].back().data()});
  }
  ASSERT_TRUE(m.forward_batch(batch).ok());  // prefill: 24 segments of 1..40 rows
  const int64_t zero = 0;
  for (size_t k = 0; k < 4; ++k) {  // decode: 24 one-row segments per step
    batch.clear();
    for (size_t i = 0; i < seqs.size(); ++i) {
      got[i].emplace_back(vocab);
      batch.push_back(
          {&states[i], std::span(&seqs[i].steps[k], 1), std::span(&zero, 1), got[i].back().data()});
    }
    ASSERT_TRUE(m.forward_batch(batch).ok());
  }
  size_t differing = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const auto want = run_alone(m, seqs[i]);
    for (size_t k = 0; k < want.size(); ++k)
      for (int v = 0; v < vocab; ++v)
        differing += std::bit_cast<uint32_t>(want[k][static_cast<size_t>(v)]) !=
                     std::bit_cast<uint32_t>(got[i][k][static_cast<size_t>(v)]);
  }
  if (want_equal) {
    EXPECT_EQ(differing, 0u) << fixture;
  } else {
    std::printf("%s without batch invariance: %zu logits differ from alone\n", fixture.c_str(),
                differing);
    ::testing::Test::RecordProperty(fixture + "_logits_differing_without_invariance",
                                    static_cast<int>(differing));
  }
}

TEST(BatchedForward, HfFixtureBitwiseEqualsAlone) {
  expect_batched_equals_alone("hf_v4_a", true, true);
}

TEST(BatchedForward, OfficialFixtureBitwiseEqualsAlone) {
  expect_batched_equals_alone("official_v4_a", true, true);
}

// Without batch invariance the stacked rows take the sgemm path: allowed to differ, recorded.
TEST(BatchedForward, NonInvariantModeRuns) { expect_batched_equals_alone("hf_v4_a", false, false); }

TEST(BatchedForward, RejectsTheSameStateTwice) {
  auto loaded = Model::load(kDir + "hf_v4_a", {1});
  ASSERT_TRUE(loaded.ok());
  Model& m = *loaded.value();
  SequenceState st = m.new_state();
  const int32_t id = 5;
  const BatchSequence b{&st, std::span(&id, 1), {}, nullptr};
  const std::vector<BatchSequence> twice{b, b};
  EXPECT_FALSE(m.forward_batch(twice).ok());
}

}  // namespace
}  // namespace deepinfer::model
