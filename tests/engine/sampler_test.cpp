// Sampler: Philox known answers, greedy/top-k/top-p/min-p edges, the vLLM/OpenAI penalty
// formulas, logprobs, batch independence, and a chi-square check of temperature sampling.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/philox.h"

namespace deepinfer::engine {
namespace {

TEST(Philox, KnownAnswersFromRandom123) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (PhiloxCounter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}),
            (PhiloxCounter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          {0xa4093822u, 0x299f31d0u}),
            (PhiloxCounter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, UniformIsInUnitInterval) {
  for (uint64_t i = 0; i < 1000; ++i) {
    const double u = philox_uniform(42, i);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
  EXPECT_NE(philox_uniform(1, 0), philox_uniform(2, 0));
  EXPECT_NE(philox_uniform(1, 0), philox_uniform(1, 1));
}

struct Row {
  std::vector<float> logits;
  std::vector<int32_t> prompt = {};
  std::vector<int32_t> output = {};
};

int32_t draw(Sampler& s, const Row& row, const SamplingParams& p, uint64_t seed = 7) {
  return s.sample(row.logits, SampleContext{p, seed, row.prompt, row.output}).token;
}

std::vector<float> log_probs(std::vector<double> probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  Sampler s(5);
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_EQ(draw(s, {{0.1f, 3.0f, -1.0f, 3.0f, 2.9f}}, p), 1);
  EXPECT_EQ(draw(s, {{-5.0f, -5.0f, -5.0f, -5.0f, -5.0f}}, p), 0);
  EXPECT_EQ(draw(s, {{0.0f, 0.0f, 0.0f, 0.0f, 1e-6f}}, p), 4);
}

TEST(Sampler, TopKOneIsGreedyForEverySeed) {
  Sampler s(6);
  Row row{{0.5f, 1.25f, 1.25f, -2.0f, 1.0f, 0.0f}};
  SamplingParams p;
  p.temperature = 1.5f;
  p.top_k = 1;
  for (uint64_t seed = 0; seed < 200; ++seed) EXPECT_EQ(draw(s, row, p, seed), 1);
}

// Returns the set of tokens drawn over many seeds.
std::vector<int> support(Sampler& s, const Row& row, const SamplingParams& p) {
  std::vector<int> seen(row.logits.size(), 0);
  for (uint64_t seed = 0; seed < 2000; ++seed) seen[draw(s, row, p, seed)] = 1;
  return seen;
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  Sampler s(3);
  Row row{log_probs({0.5, 0.3, 0.2})};
  SamplingParams p;
  p.top_p = 0.5f;  // token 0 alone carries 0.5
  EXPECT_EQ(support(s, row, p), (std::vector<int>{1, 0, 0}));
  p.top_p = 0.79f;
  EXPECT_EQ(support(s, row, p), (std::vector<int>{1, 1, 0}));
  p.top_p = 0.81f;
  EXPECT_EQ(support(s, row, p), (std::vector<int>{1, 1, 1}));
  p.top_p = 1e-6f;  // always at least the top token
  EXPECT_EQ(support(s, row, p), (std::vector<int>{1, 0, 0}));
  p.top_p = 1.0f;
  EXPECT_EQ(support(s, row, p), (std::vector<int>{1, 1, 1}));
}

TEST(Sampler, TopPOverALargeVocabularySortsBeyondTheHead) {
  // 4096 equal tokens: top_p 0.9 needs 3687 of them, more than the sorted head.
  Sampler s(4096);
  Row row{std::vector<float>(4096, 0.0f)};
  SamplingParams p;
  p.top_p = 0.9f;
  int max_token = 0;
  for (uint64_t seed = 0; seed < 500; ++seed)
    max_token = std::max(max_token, draw(s, row, p, seed));
  EXPECT_GT(max_token, 3000);
  EXPECT_LT(max_token, 3687);
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheBest) {
  Sampler s(3);
  Row row{log_probs({0.5, 0.3, 0.2})};
  SamplingParams p;
  p.min_p = 0.5f;  // threshold 0.25
  EXPECT_EQ(support(s, row, p), (std::vector<int>{1, 1, 0}));
}

TEST(Sampler, TopKThenTopP) {
  Sampler s(4);
  Row row{log_probs({0.4, 0.3, 0.2, 0.1})};
  SamplingParams p;
  p.top_k = 3;  // renormalised: 4/9, 3/9, 2/9
  EXPECT_EQ(support(s, row, p), (std::vector<int>{1, 1, 1, 0}));
  p.top_p = 0.7f;  // 4/9 + 3/9 = 0.78 >= 0.7
  EXPECT_EQ(support(s, row, p), (std::vector<int>{1, 1, 0, 0}));
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  Sampler s(2);
  SamplingParams p;
  p.temperature = 0.0f;
  p.repetition_penalty = 2.0f;
  EXPECT_EQ(draw(s, {{2.0f, 1.5f}, {0}, {}}, p), 1);  // 2 / 2 = 1 < 1.5
  p.repetition_penalty = 1.2f;
  EXPECT_EQ(draw(s, {{2.0f, 1.5f}, {0}, {}}, p), 0);  // 2 / 1.2 = 1.67 > 1.5
  p.repetition_penalty = 2.0f;
  EXPECT_EQ(draw(s, {{-1.0f, -1.5f}, {}, {0}}, p), 1);  // -1 * 2 = -2 < -1.5
  // Applied once per distinct token, however often it occurs.
  EXPECT_EQ(draw(s, {{4.0f, 1.5f}, {0, 0}, {0, 0, 0}}, p), 0);  // 4 / 2 = 2 > 1.5
}

TEST(Sampler, FrequencyAndPresencePenaltiesFollowOpenAI) {
  // mu[j] -= c[j] * frequency_penalty + (c[j] > 0) * presence_penalty, over generated tokens.
  Sampler s(2);
  SamplingParams p;
  p.temperature = 0.0f;
  Row row{{3.0f, 1.0f}, {1, 1, 1, 1}, {0, 0, 0}};
  p.frequency_penalty = 0.5f;  // 3 - 1.5 = 1.5 > 1 (the prompt does not count)
  EXPECT_EQ(draw(s, row, p), 0);
  p.frequency_penalty = 0.7f;  // 3 - 2.1 = 0.9 < 1
  EXPECT_EQ(draw(s, row, p), 1);
  p.frequency_penalty = 0.0f;
  p.presence_penalty = 1.5f;  // once: 1.5 > 1
  EXPECT_EQ(draw(s, row, p), 0);
  p.presence_penalty = 2.0f;  // 1.0 vs 1.0: tie → lowest id
  EXPECT_EQ(draw(s, row, p), 0);
  p.presence_penalty = -2.0f;
  EXPECT_EQ(draw(s, {{1.0f, 2.5f}, {}, {0}}, p), 0);  // negative rewards repetition
}

TEST(Sampler, LogitBiasIsAddedBeforeSelection) {
  Sampler s(3);
  SamplingParams p;
  p.temperature = 0.0f;
  p.logit_bias = {{0, 1.5f}};
  EXPECT_EQ(draw(s, {{1.0f, 2.0f, 0.0f}}, p), 0);
  p.logit_bias = {{1, -100.0f}, {0, -100.0f}};
  EXPECT_EQ(draw(s, {{1.0f, 2.0f, 0.0f}}, p), 2);
}

TEST(Sampler, LogprobsAreRawLogSoftmaxWithSortedTop) {
  Sampler s(4);
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = true;
  p.top_logprobs = 3;
  p.logit_bias = {{3, 10.0f}};  // changes the choice, not the reported (raw) logprobs
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 0.0f};
  const std::vector<int32_t> none;
  const SampleResult r = s.sample(logits, SampleContext{p, 0, none, none});
  const double z = std::log(std::exp(1.0) + 2 * std::exp(3.0) + 1.0);
  EXPECT_EQ(r.token, 3);
  EXPECT_NEAR(r.logprob, 0.0 - z, 1e-6);
  ASSERT_EQ(r.num_top, 3);
  EXPECT_EQ(r.top[0].token, 1);
  EXPECT_EQ(r.top[1].token, 2);
  EXPECT_EQ(r.top[2].token, 0);
  EXPECT_NEAR(r.top[0].logprob, 3.0 - z, 1e-6);
  EXPECT_NEAR(r.top[2].logprob, 1.0 - z, 1e-6);
}

TEST(Sampler, ADrawDependsOnlyOnSeedAndTokenIndex) {
  Row row{{0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f}};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.95f;
  p.repetition_penalty = 1.3f;
  row.output = {3, 4, 3};
  Sampler alone(8), busy(8);
  std::vector<int32_t> got_alone, got_busy;
  for (uint64_t seed = 0; seed < 100; ++seed) got_alone.push_back(draw(alone, row, p, seed));
  for (uint64_t seed = 0; seed < 100; ++seed) {
    Row other{{5.0f, 0.0f, 1.0f, 2.0f, 0.0f, 0.0f, 0.0f, 9.0f}, {7, 7}, {0, 1, 2, 7, 7}};
    SamplingParams q;
    q.frequency_penalty = 1.0f;
    draw(busy, other, q, seed + 1000);  // a batch neighbour sampled first on the same Sampler
    got_busy.push_back(draw(busy, row, p, seed));
  }
  EXPECT_EQ(got_alone, got_busy);
}

TEST(Sampler, TemperatureSamplingMatchesTheSoftmaxChiSquare) {
  const std::vector<float> logits = {0.3f, -1.2f, 2.0f, 0.0f, 1.1f, -0.4f, 0.9f, 1.7f};
  const float temperature = 0.7f;
  std::vector<double> expected(logits.size());
  double z = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) z += expected[i] = std::exp(logits[i] / temperature);
  constexpr int kDraws = 40000;
  std::vector<int32_t> history(kDraws, 0);
  std::vector<int> counts(logits.size(), 0);
  Sampler s(8);
  SamplingParams p;
  p.temperature = temperature;
  for (int i = 0; i < kDraws; ++i) {
    const std::span<const int32_t> output(history.data(), i);  // token index i
    ++counts[s.sample(logits, SampleContext{p, 12345, {}, output}).token];
  }
  double chi2 = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double e = kDraws * expected[i] / z;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  EXPECT_LT(chi2, 24.32);  // 7 degrees of freedom, p = 0.001
}

TEST(SamplingParams, ValidationNamesTheField) {
  SamplingParams p;
  EXPECT_TRUE(validate(p, 10).ok());
  p.top_p = 0.0f;
  EXPECT_NE(validate(p, 10).error().message.find("top_p"), std::string::npos);
  p = {};
  p.logit_bias = {{10, 1.0f}};
  EXPECT_NE(validate(p, 10).error().message.find("logit_bias"), std::string::npos);
  p = {};
  p.temperature = -1.0f;
  EXPECT_FALSE(validate(p, 10).ok());
  p = {};
  p.top_logprobs = 3;
  EXPECT_FALSE(validate(p, 10).ok());
  p.logprobs = true;
  EXPECT_TRUE(validate(p, 10).ok());
  p.max_tokens = 0;
  EXPECT_FALSE(validate(p, 10).ok());
}

}  // namespace
}  // namespace deepinfer::engine
