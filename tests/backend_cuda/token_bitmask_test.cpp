// TokenBitmask (structured-output masks on device logits) against a plain reference loop: random
// masks at the real V4 vocabulary (129,280) and at an odd size, unconstrained rows (flag or all
// ones) untouched, padded row strides, one upload per step reused across steps, bad arguments as
// errors. Emulated tests run the kernel body on the host; the device test skips without a GPU.
#include "backend/cuda/token_bitmask.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/cuda_model.h"

namespace deepinfer::cuda {
namespace {

// What the mask means, spelled out: a constrained row keeps the logits of set bits and gets
// -inf elsewhere; an unconstrained row and the padding past V keep their values.
void reference(std::vector<float>& logits, int64_t V, int64_t stride,
               const std::vector<std::vector<uint64_t>>& masks) {
  for (size_t r = 0; r < masks.size(); ++r) {
    if (masks[r].empty()) continue;
    for (int64_t t = 0; t < V; ++t) {
      const bool allowed = (masks[r][static_cast<size_t>(t / 64)] >> (t % 64)) & 1u;
      if (!allowed) logits[r * stride + t] = -INFINITY;
    }
  }
}

std::vector<float> random_logits(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> d(-20.0f, 20.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Row kinds: 0 = no constraint (flag), 1 = all ones, 2 = sparse random, 3 = dense random,
// 4 = a single allowed token.
std::vector<uint64_t> random_mask(int kind, int64_t V, std::mt19937_64& rng) {
  const int64_t W = token_bitmask_words(V);
  std::vector<uint64_t> m(static_cast<size_t>(W), 0);
  if (kind == 1) {
    std::fill(m.begin(), m.end(), ~0ull);  // tail bits past V set too: must be ignored
  } else if (kind == 2 || kind == 3) {
    std::bernoulli_distribution on(kind == 2 ? 0.01 : 0.7);
    for (int64_t t = 0; t < V; ++t) {
      if (on(rng)) m[static_cast<size_t>(t / 64)] |= 1ull << (t % 64);
    }
  } else if (kind == 4) {
    const int64_t t = static_cast<int64_t>(rng() % static_cast<uint64_t>(V));
    m[static_cast<size_t>(t / 64)] |= 1ull << (t % 64);
  }
  return m;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// One step: stage each row (kinds cycle), apply, compare with the reference. `to_device` and
// `to_host` move the logits for the device test (identity when emulated).
template <class Run>
void check_steps(bool emulate, int64_t V, int rows, int64_t stride, int steps, Run run) {
  std::mt19937_64 rng(static_cast<uint64_t>(V) * 31 + static_cast<uint64_t>(rows));
  auto tb = TokenBitmask::create({.max_rows = rows + 3, .vocab_size = V, .emulate = emulate});
  ASSERT_TRUE(tb.ok()) << tb.error().message;
  TokenBitmask& m = *tb.value();
  EXPECT_EQ(m.words_per_row(), (V + 63) / 64);
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<uint64_t>> masks(static_cast<size_t>(rows));
    for (int r = 0; r < rows; ++r) {
      const int kind = (r + step) % 5;
      if (kind == 0) {
        m.set_unconstrained(r);
        continue;
      }
      masks[static_cast<size_t>(r)] = random_mask(kind, V, rng);
      if (r % 2) {
        ASSERT_TRUE(m.stage(r, masks[static_cast<size_t>(r)]).ok());
      } else {  // written in place, as a matcher's fill_mask would
        std::span<uint64_t> dst = m.row(r);
        ASSERT_EQ(dst.size(), masks[static_cast<size_t>(r)].size());
        std::copy(masks[static_cast<size_t>(r)].begin(), masks[static_cast<size_t>(r)].end(),
                  dst.begin());
      }
    }
    const std::vector<float> before =
        random_logits(static_cast<size_t>(rows) * static_cast<size_t>(stride), rng);
    std::vector<float> want = before;
    reference(want, V, stride, masks);
    std::vector<float> got = run(m, before, rows, stride);
    ASSERT_TRUE(same_bits(got, want)) << "V " << V << " rows " << rows << " step " << step;
    // Unconstrained and all-ones rows are bit-for-bit the input; single-token rows keep one.
    for (int r = 0; r < rows; ++r) {
      const size_t o = static_cast<size_t>(r) * static_cast<size_t>(stride);
      const int kind = (r + step) % 5;
      int64_t finite = 0;
      for (int64_t t = 0; t < V; ++t) finite += std::isfinite(got[o + static_cast<size_t>(t)]);
      if (kind <= 1) {
        EXPECT_EQ(std::memcmp(&got[o], &before[o], static_cast<size_t>(stride) * sizeof(float)), 0)
            << "row " << r;
      }
      if (kind == 4) {
        EXPECT_EQ(finite, 1) << "row " << r;
      }
    }
  }
}

std::vector<float> run_emulated(TokenBitmask& m, const std::vector<float>& in, int rows,
                                int64_t stride) {
  std::vector<float> out = in;
  const Status s = m.apply(out.data(), rows, stride);
  EXPECT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(m.synchronize().ok());
  return out;
}

TEST(TokenBitmaskEmulated, RealVocabMatchesReference) {
  check_steps(true, 129280, 6, 129280, 3, run_emulated);
}

TEST(TokenBitmaskEmulated, OddVocabAndPaddedStride) {
  check_steps(true, 1001, 11, 1001, 4, run_emulated);
  check_steps(true, 129281, 3, 129296, 2, run_emulated);  // padding past V stays as it was
  check_steps(true, 1, 2, 1, 5, run_emulated);
}

TEST(TokenBitmaskEmulated, RowsResetAfterApply) {
  const int64_t V = 200;
  auto tb = TokenBitmask::create({.max_rows = 2, .vocab_size = V, .emulate = true});
  ASSERT_TRUE(tb.ok());
  TokenBitmask& m = *tb.value();
  std::vector<uint64_t> none(static_cast<size_t>(m.words_per_row()), 0);
  ASSERT_TRUE(m.stage(1, none).ok());
  std::vector<float> logits(2 * V, 1.0f);
  ASSERT_TRUE(m.apply(logits.data(), 2, V).ok());
  for (int64_t t = 0; t < V; ++t) {
    EXPECT_EQ(logits[static_cast<size_t>(t)], 1.0f);
    EXPECT_EQ(logits[static_cast<size_t>(V + t)], -INFINITY);
  }
  // Nothing staged for the next step: both rows unconstrained.
  std::fill(logits.begin(), logits.end(), 2.0f);
  ASSERT_TRUE(m.apply(logits.data(), 2, V).ok());
  for (float x : logits) EXPECT_EQ(x, 2.0f);
}

TEST(TokenBitmaskEmulated, BadArgumentsAreErrors) {
  EXPECT_FALSE(TokenBitmask::create({.max_rows = 1, .vocab_size = 0, .emulate = true}).ok());
  EXPECT_FALSE(TokenBitmask::create({.max_rows = 0, .vocab_size = 10, .emulate = true}).ok());
  EXPECT_FALSE(TokenBitmask::create({.max_rows = 70000, .vocab_size = 10, .emulate = true}).ok());
  auto tb = TokenBitmask::create({.max_rows = 2, .vocab_size = 100, .emulate = true});
  ASSERT_TRUE(tb.ok());
  TokenBitmask& m = *tb.value();
  std::vector<float> logits(300, 0.0f);
  EXPECT_FALSE(m.apply(logits.data(), 3, 100).ok());  // more rows than max_rows
  EXPECT_FALSE(m.apply(logits.data(), 1, 99).ok());   // stride below V
  EXPECT_FALSE(m.apply(nullptr, 1, 100).ok());
  EXPECT_FALSE(m.stage(2, std::vector<uint64_t>(2, 0)).ok());  // row out of range
  EXPECT_FALSE(m.stage(0, std::vector<uint64_t>(1, 0)).ok());  // wrong word count
  EXPECT_TRUE(m.row(5).empty());
  EXPECT_TRUE(m.apply(logits.data(), 0, 100).ok());
}

TEST(TokenBitmaskDevice, MatchesReference) {
  if (!device_available()) GTEST_SKIP() << device_name();
  auto run_device = [](TokenBitmask& m, const std::vector<float>& in, int rows, int64_t stride) {
    std::vector<float> out(in.size());
    float* d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, in.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(d, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    const Status s = m.apply(d, rows, stride);
    EXPECT_TRUE(s.ok()) << s.error().message;
    EXPECT_TRUE(m.synchronize().ok());
    EXPECT_EQ(cudaMemcpy(out.data(), d, in.size() * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    cudaFree(d);
    return out;
  };
  check_steps(false, 129280, 64, 129280, 3, run_device);
  check_steps(false, 1001, 11, 1001, 4, run_device);
  check_steps(false, 129281, 3, 129296, 2, run_device);
}

}  // namespace
}  // namespace deepinfer::cuda
