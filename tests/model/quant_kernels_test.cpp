// The official-numerics kernels against the reference kernels' outputs (tests/fixtures/quant):
// act_quant per 128 (codes and UE8M0 scales), in-place FP8 KV QAT per 64, in-place FP4 QAT per 32,
// the Hadamard rotation, and the FP8×FP8 / FP8×FP4 block-scaled GEMMs with bf16 output.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cpu/fp8.h"
#include "backend/cpu/quant_act.h"
#include "backend/cpu/quant_linear.h"
#include "backend/cpu/thread_pool.h"
#include "quant_fixture.h"

namespace deepinfer {
namespace {

using cpu::WeightFormat;
using cpu::WeightView;
using quant_test::QuantFixture;
using quant_test::same_float;

void expect_bitwise(const std::vector<float>& got, const std::vector<float>& want,
                    const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!same_float(got[i], want[i]) && bad++ < 10) {
      ADD_FAILURE() << what << "[" << i << "] " << got[i] << " vs " << want[i];
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

TEST(QuantKernels, ActQuantPer128CodesAndScales) {
  auto& f = QuantFixture::get();
  ASSERT_TRUE(f.ok());
  const auto x = f.f32("act_x");
  const auto want_q = f.u8("act_q");
  const auto want_s = f.f32("act_s");
  std::vector<uint8_t> q(x.size());
  std::vector<float> s(want_s.size());
  for (int r = 0; r < 6; ++r)
    cpu::fp8_act_quant(x.data() + r * 384, 384, 128, q.data() + r * 384, s.data() + r * 3);
  expect_bitwise(s, want_s, "scales");
  EXPECT_EQ(q, want_q);
  EXPECT_EQ(s[3], cpu::pow2_at_least(1e-4f / 448.0f));  // the all-zero row: amax floor 1e-4
}

TEST(QuantKernels, KvFp8QatInPlacePer64) {
  auto& f = QuantFixture::get();
  ASSERT_TRUE(f.ok());
  auto x = f.f32("kvq_x");
  for (int r = 0; r < 6; ++r) cpu::fp8_act_quant_inplace(x.data() + r * 448, 448, 64);
  expect_bitwise(x, f.f32("kvq_y"), "kv");
}

TEST(QuantKernels, Fp4QatInPlacePer32) {
  auto& f = QuantFixture::get();
  ASSERT_TRUE(f.ok());
  auto x = f.f32("fp4q_x");
  cpu::fp4_act_quant_inplace(x.data(), static_cast<int64_t>(x.size()), 32);
  expect_bitwise(x, f.f32("fp4q_y"), "fp4");
}

TEST(QuantKernels, HadamardRotation128) {
  auto& f = QuantFixture::get();
  ASSERT_TRUE(f.ok());
  auto x = f.f32("had_x");
  cpu::hadamard_rotate_rows(x.data(), 6, 128);
  expect_bitwise(x, f.f32("had_y"), "hadamard");
}

// bf16 outputs of a GEMM whose fp32 block sums run in another order: allow one bf16 ulp.
void expect_bf16_close(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  int exact = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float ulp = std::ldexp(1.0f, std::ilogb(std::fabs(want[i]) + 1e-30f) - 7);
    EXPECT_LE(std::fabs(got[i] - want[i]), ulp) << i << ": " << got[i] << " vs " << want[i];
    exact += got[i] == want[i];
    EXPECT_EQ(got[i], cpu::round_bf16(got[i])) << "output not bf16";
  }
  EXPECT_GE(exact, static_cast<int>(got.size() * 9 / 10));
}

WeightView gemm8_view(const std::vector<uint8_t>& q, const std::vector<uint8_t>& s) {
  WeightView v;
  v.format = WeightFormat::FP8_E4M3_BLOCK;
  v.data = q.data();
  v.out = 200;
  v.in = 384;
  v.scale = s.data();
  v.scale_format = cpu::ScaleFormat::UE8M0;
  v.block_out = v.block_in = 128;
  v.scale_stride = 3;
  return v;
}

TEST(QuantKernels, Fp8GemmOfficialNumerics) {
  auto& f = QuantFixture::get();
  ASSERT_TRUE(f.ok());
  const auto x = f.f32("gemm8_x");
  const auto q = f.u8("gemm8_wq");
  const auto s = f.u8("gemm8_ws");
  const WeightView v = gemm8_view(q, s);
  std::vector<float> y(3 * 200);
  cpu::quant_linear_range(x.data(), 3, v, y.data(), 0, 200, cpu::QuantActivations::Official);
  expect_bf16_close(y, f.f32("gemm8_y"));
}

TEST(QuantKernels, Fp4GemmOfficialNumerics) {
  auto& f = QuantFixture::get();
  ASSERT_TRUE(f.ok());
  const auto x = f.f32("gemm4_x");
  const auto p = f.u8("gemm4_wp");
  const auto s = f.u8("gemm4_ws");
  WeightView v;
  v.format = WeightFormat::FP4_E2M1_BLOCK32;
  v.data = p.data();
  v.out = 64;
  v.in = 256;
  v.scale = s.data();
  v.scale_format = cpu::ScaleFormat::UE8M0;
  v.block_out = 1;
  v.block_in = 32;
  v.scale_stride = 8;
  std::vector<float> y(3 * 64);
  cpu::quant_linear_range(x.data(), 3, v, y.data(), 0, 64, cpu::QuantActivations::Official);
  expect_bf16_close(y, f.f32("gemm4_y"));
}

TEST(QuantKernels, DispatchThreadsAndRowsGiveTheSameBits) {
  auto& f = QuantFixture::get();
  ASSERT_TRUE(f.ok());
  const auto x = f.f32("gemm8_x");
  const auto q = f.u8("gemm8_wq");
  const auto s = f.u8("gemm8_ws");
  const WeightView v = gemm8_view(q, s);
  cpu::register_quant_kernels(cpu::QuantActivations::Official);
  ASSERT_TRUE(cpu::linear_supported(WeightFormat::FP8_E4M3_BLOCK));
  ASSERT_TRUE(cpu::linear_supported(WeightFormat::FP4_E2M1_BLOCK32));
  std::vector<float> one(3 * 200), pooled(3 * 200), single(200);
  cpu::linear(x.data(), 3, v, one.data(), nullptr);
  cpu::ThreadPool pool(3);
  cpu::linear(x.data(), 3, v, pooled.data(), &pool);
  EXPECT_EQ(one, pooled);
  for (int r = 0; r < 3; ++r) {  // batch invariance: a row alone gives the same bits
    cpu::linear(x.data() + r * 384, 1, v, single.data(), &pool);
    EXPECT_TRUE(std::equal(single.begin(), single.end(), one.begin() + r * 200)) << r;
  }
}

TEST(QuantKernels, PrefillPathMatchesTheRowPathWithinOneBf16Ulp) {
  auto& f = QuantFixture::get();
  ASSERT_TRUE(f.ok());
  const auto x3 = f.f32("gemm8_x");
  const auto q = f.u8("gemm8_wq");
  const auto s = f.u8("gemm8_ws");
  const WeightView v = gemm8_view(q, s);
  std::vector<float> x;  // 15 rows: the three fixture rows, repeated
  for (int i = 0; i < 5; ++i) x.insert(x.end(), x3.begin(), x3.end());
  std::vector<float> many(15 * 200), one(200);
  cpu::quant_linear_range(x.data(), 15, v, many.data(), 0, 200, cpu::QuantActivations::Official);
  for (int r = 0; r < 15; ++r) {
    cpu::quant_linear_range(x.data() + r * 384, 1, v, one.data(), 0, 200,
                            cpu::QuantActivations::Official);
    for (int o = 0; o < 200; ++o) {
      const float a = many[r * 200 + o], b = one[o];
      EXPECT_EQ(a, cpu::round_bf16(a));
      EXPECT_LE(std::fabs(a - b), std::ldexp(1.0f, std::ilogb(std::fabs(b) + 1e-30f) - 7))
          << r << "," << o;
    }
  }
}

TEST(QuantKernels, Fp32ModeIsThePlainProductWithDequantizedWeights) {
  auto& f = QuantFixture::get();
  ASSERT_TRUE(f.ok());
  const auto x = f.f32("gemm8_x");
  const auto q = f.u8("gemm8_wq");
  const auto s = f.u8("gemm8_ws");
  const WeightView v = gemm8_view(q, s);
  std::vector<float> y(3 * 200), row(384);
  cpu::quant_linear_range(x.data(), 3, v, y.data(), 0, 200, cpu::QuantActivations::Fp32);
  for (int o = 0; o < 200; ++o) {
    cpu::quant_dequantize_row(v, o, row.data());
    for (int r = 0; r < 3; ++r) {
      double ref = 0;
      for (int k = 0; k < 384; ++k) ref += static_cast<double>(x[r * 384 + k]) * row[k];
      EXPECT_NEAR(y[r * 200 + o], ref, 1e-5 * (1 + std::fabs(ref)));
    }
  }
}

TEST(QuantKernels, UnquantizedInputForWoA) {
  // quantize_input = false (wo_a): x is used as given, the output is still bf16.
  auto& f = QuantFixture::get();
  ASSERT_TRUE(f.ok());
  const auto x = f.f32("gemm8_x");
  const auto q = f.u8("gemm8_wq");
  const auto s = f.u8("gemm8_ws");
  WeightView v = gemm8_view(q, s);
  v.quantize_input = false;
  std::vector<float> y(3 * 200), exact(3 * 200);
  cpu::quant_linear_range(x.data(), 3, v, y.data(), 0, 200, cpu::QuantActivations::Official);
  cpu::quant_linear_range(x.data(), 3, v, exact.data(), 0, 200, cpu::QuantActivations::Fp32);
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_EQ(y[i], cpu::round_bf16(y[i]));
    EXPECT_NEAR(y[i], exact[i], std::fabs(exact[i]) * 0x1p-7f + 1e-6f);
  }
}

TEST(QuantKernels, LargeBlockScalesAreExact) {
  // A scale of 2^13 (beyond the fast decode's range) on a 16-wide row: 1·448·2^13 etc.
  std::vector<uint8_t> q(16, 0x38);  // 1.0
  q[3] = 0x7e;                       // 448
  const uint8_t scale = 127 + 13;
  WeightView v;
  v.format = WeightFormat::FP8_E4M3_BLOCK;
  v.data = q.data();
  v.out = 1;
  v.in = 16;
  v.scale = &scale;
  v.scale_format = cpu::ScaleFormat::UE8M0;
  v.block_out = v.block_in = 128;
  v.scale_stride = 1;
  std::vector<float> x(32, 1.0f);
  float y = 0;
  cpu::quant_linear_range(x.data(), 1, v, &y, 0, 1, cpu::QuantActivations::Fp32);
  EXPECT_EQ(y, (15.0f + 448.0f) * 8192.0f);
  q.resize(32, 0x38);  // 32 wide: the AVX-512 path where the CPU has it
  v.in = 32;
  v.data = q.data();
  cpu::quant_linear_range(x.data(), 1, v, &y, 0, 1, cpu::QuantActivations::Fp32);
  EXPECT_EQ(y, (31.0f + 448.0f) * 8192.0f);
}

TEST(QuantKernels, NanCodesDecodeAsNanInTheRowDecoder) {
  const std::vector<uint8_t> q = {0x7f, 0xff, 0x00, 0x38};
  const uint8_t scale = 127;
  WeightView v;
  v.format = WeightFormat::FP8_E4M3_BLOCK;
  v.data = q.data();
  v.out = 1;
  v.in = 4;
  v.scale = &scale;
  v.scale_format = cpu::ScaleFormat::UE8M0;
  v.block_out = v.block_in = 128;
  v.scale_stride = 1;
  float row[4];
  cpu::quant_dequantize_row(v, 0, row);
  EXPECT_TRUE(std::isnan(row[0]));
  EXPECT_TRUE(std::isnan(row[1]));
  EXPECT_EQ(row[2], 0.0f);
  EXPECT_EQ(row[3], 1.0f);
}

}  // namespace
}  // namespace deepinfer
