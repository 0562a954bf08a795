// CPU linear kernels (backend/cpu/weight_view.h): F32 and BF16 weights, GEMV (few rows) and the
// sgemm path (many rows), odd widths, row sub-views and the thread pool, against a naive product.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "backend/cpu/simd.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/weight_view.h"

namespace deepinfer::cpu {
namespace {

struct Case {
  int64_t rows, out, in;
};

TEST(CpuLinear, MatchesNaiveProduct) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  ThreadPool pool(2);
  for (const Case& k : {Case{1, 7, 5}, Case{3, 40, 120}, Case{4, 33, 160}, Case{5, 64, 47},
                        Case{11, 17, 224}, Case{12, 130, 96}, Case{37, 65, 161}}) {
    std::vector<float> x(k.rows * k.in), wf(k.out * k.in);
    std::vector<uint16_t> wb(k.out * k.in);
    for (auto& v : x) v = u(rng);
    for (size_t i = 0; i < wf.size(); ++i) {
      wb[i] = f32_to_bf16(u(rng));
      wf[i] = bf16_to_f32(wb[i]);  // the same values in both formats
    }
    std::vector<double> want(k.rows * k.out);
    for (int64_t r = 0; r < k.rows; ++r) {
      for (int64_t o = 0; o < k.out; ++o) {
        double s = 0;
        for (int64_t i = 0; i < k.in; ++i) s += double{x[r * k.in + i]} * wf[o * k.in + i];
        want[r * k.out + o] = s;
      }
    }
    for (WeightFormat f : {WeightFormat::F32, WeightFormat::BF16}) {
      WeightView w;
      w.format = f;
      w.data = f == WeightFormat::F32 ? static_cast<const void*>(wf.data()) : wb.data();
      w.out = k.out;
      w.in = k.in;
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        std::vector<float> y(k.rows * k.out, NAN);
        linear(x.data(), k.rows, w, y.data(), p);
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_NEAR(y[i], want[i], 1e-4) << to_string(f) << " rows " << k.rows << " i " << i;
        }
      }
      // Rows [2, out) of the same storage.
      if (k.out > 2) {
        std::vector<float> y(k.rows * (k.out - 2));
        linear(x.data(), k.rows, w.rows(2, k.out - 2), y.data(), &pool);
        for (int64_t r = 0; r < k.rows; ++r) {
          for (int64_t o = 2; o < k.out; ++o) {
            ASSERT_NEAR(y[r * (k.out - 2) + o - 2], want[r * k.out + o], 1e-4);
          }
        }
      }
      std::vector<float> row(k.in);
      dequantize_row(w, k.out - 1, row.data());
      for (int64_t i = 0; i < k.in; ++i) ASSERT_EQ(row[i], wf[(k.out - 1) * k.in + i]);
    }
  }
}

TEST(CpuLinear, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);  // halfway 1 + 2^-8: ties to even
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);  // halfway 1 + 3·2^-8: ties to even (up)
  EXPECT_EQ(bf16_to_f32(0xc000), -2.0f);
}

TEST(ThreadPool, CoversTheRangeOnce) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 2, 7, 1000}) {
    std::vector<int> hits(static_cast<size_t>(n), 0);
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
    });
    for (int h : hits) EXPECT_EQ(h, 1);
  }
}

}  // namespace
}  // namespace deepinfer::cpu
