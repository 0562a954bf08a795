// FP8 e4m3, UE8M0 and FP4 e2m1 decoding/rounding, and block-scaled weight rows, bit-exact against
// torch's float8 conversions (tests/fixtures/quant, made on the GPU machine).
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/fp4.h"
#include "backend/cpu/fp8.h"
#include "backend/cpu/quant_linear.h"
#include "quant_fixture.h"

namespace deepinfer {
namespace {

using cpu::WeightFormat;
using cpu::WeightView;
using quant_test::QuantFixture;
using quant_test::same_float;

TEST(QuantFormats, FixtureLoads) { ASSERT_TRUE(QuantFixture::get().ok()); }

TEST(QuantFormats, E4m3DecodesAll256CodesLikeTorch) {
  auto& f = QuantFixture::get();
  ASSERT_TRUE(f.ok());
  const auto want = f.f32("e4m3_values");
  int nans = 0;
  for (int c = 0; c < 256; ++c) {
    const float got = cpu::fp8_e4m3_to_float(static_cast<uint8_t>(c));
    EXPECT_TRUE(same_float(got, want[c])) << "code " << c << ": " << got << " vs " << want[c];
    nans += std::isnan(got);
  }
  EXPECT_EQ(nans, 2);  // 0x7f and 0xff
  EXPECT_EQ(cpu::fp8_e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(cpu::fp8_e4m3_to_float(0x01), 0x1p-9f);
}

TEST(QuantFormats, E8m0DecodesAll256CodesLikeTorch) {
  auto& f = QuantFixture::get();
  ASSERT_TRUE(f.ok());
  const auto want = f.f32("e8m0_values");
  for (int c = 0; c < 256; ++c) {
    EXPECT_TRUE(same_float(cpu::ue8m0_to_float(static_cast<uint8_t>(c)), want[c])) << "code " << c;
  }
  EXPECT_EQ(cpu::ue8m0_to_float(127), 1.0f);
  EXPECT_TRUE(std::isnan(cpu::ue8m0_to_float(255)));
}

TEST(QuantFormats, E4m3RoundsToNearestEvenWithSaturationLikeTorch) {
  auto& f = QuantFixture::get();
  ASSERT_TRUE(f.ok());
  const auto in = f.f32("e4m3_round_in");
  const auto want = f.u8("e4m3_round_sat_codes");
  ASSERT_EQ(in.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const uint8_t got = cpu::float_to_fp8_e4m3(in[i]);
    const bool same =
        std::isnan(in[i]) ? (got & 0x7f) == 0x7f && (want[i] & 0x7f) == 0x7f : got == want[i];
    if (!same && bad++ < 10)
      ADD_FAILURE() << "x=" << in[i] << " got " << int(got) << " want " << int(want[i]);
  }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(cpu::float_to_fp8_e4m3(1e9f), 0x7e);
  EXPECT_EQ(cpu::float_to_fp8_e4m3(-INFINITY), 0xfe);
}

TEST(QuantFormats, E2m1TableAndRoundingMatchTheQuantizer) {
  auto& f = QuantFixture::get();
  ASSERT_TRUE(f.ok());
  const auto table = f.f32("e2m1_values");
  for (int c = 0; c < 16; ++c) {
    EXPECT_TRUE(same_float(cpu::fp4_e2m1_to_float(static_cast<uint8_t>(c)), table[c])) << c;
  }
  const auto in = f.f32("e2m1_round_in");
  const auto want = f.u8("e2m1_round_codes");
  int bad = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const uint8_t got = cpu::float_to_fp4_e2m1(in[i]);
    if (got != want[i] && bad++ < 10)
      ADD_FAILURE() << "x=" << in[i] << " got " << int(got) << " want " << int(want[i]);
  }
  EXPECT_EQ(bad, 0);
  // Spec §5: ties go to the even code.
  EXPECT_EQ(cpu::round_fp4_e2m1(2.5f), 2.0f);
  EXPECT_EQ(cpu::round_fp4_e2m1(5.0f), 4.0f);
  EXPECT_EQ(cpu::round_fp4_e2m1(1.75f), 2.0f);
  EXPECT_EQ(cpu::round_fp4_e2m1(-0.75f), -1.0f);
}

WeightView fp8_view(const std::vector<uint8_t>& q, const void* s, cpu::ScaleFormat sf, int64_t out,
                    int64_t in) {
  WeightView v;
  v.format = WeightFormat::FP8_E4M3_BLOCK;
  v.data = q.data();
  v.out = out;
  v.in = in;
  v.scale = s;
  v.scale_format = sf;
  v.block_out = v.block_in = 128;
  v.scale_stride = (in + 127) / 128;
  return v;
}

void expect_rows_equal(const WeightView& v, const std::vector<float>& want) {
  std::vector<float> row(static_cast<size_t>(v.in));
  int bad = 0;
  for (int64_t r = 0; r < v.out; ++r) {
    cpu::quant_dequantize_row(v, r, row.data());
    for (int64_t k = 0; k < v.in; ++k) {
      if (!same_float(row[k], want[r * v.in + k]) && bad++ < 10) {
        ADD_FAILURE() << "[" << r << "," << k << "] " << row[k] << " vs " << want[r * v.in + k];
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(QuantFormats, Fp8BlockRowsWithUe8m0ScalesAndPartialBlocks) {
  auto& f = QuantFixture::get();
  ASSERT_TRUE(f.ok());
  const auto q = f.u8("fp8w_q");
  const auto s = f.u8("fp8w_s");
  expect_rows_equal(fp8_view(q, s.data(), cpu::ScaleFormat::UE8M0, 300, 200), f.f32("fp8w_deq"));
}

TEST(QuantFormats, Fp8BlockRowsWithF32Scales) {
  auto& f = QuantFixture::get();
  ASSERT_TRUE(f.ok());
  const auto q = f.u8("fp8wf_q");
  const auto s = f.f32("fp8wf_s");
  expect_rows_equal(fp8_view(q, s.data(), cpu::ScaleFormat::F32, 300, 200), f.f32("fp8wf_deq"));
}

TEST(QuantFormats, Fp4PackedRowsLowNibbleFirstWithPer32Scales) {
  auto& f = QuantFixture::get();
  ASSERT_TRUE(f.ok());
  const auto p = f.u8("fp4w_packed");
  const auto s = f.u8("fp4w_s");
  WeightView v;
  v.format = WeightFormat::FP4_E2M1_BLOCK32;
  v.data = p.data();
  v.out = 48;
  v.in = 256;
  v.scale = s.data();
  v.scale_format = cpu::ScaleFormat::UE8M0;
  v.block_out = 1;
  v.block_in = 32;
  v.scale_stride = 8;
  expect_rows_equal(v, f.f32("fp4w_deq"));
  // The packing order itself: byte 0x21 holds element 0 = 0.5 (low) and element 1 = 1.0 (high).
  const uint8_t byte = 0x21;
  EXPECT_EQ(cpu::fp4_packed_at(&byte, 0), 0.5f);
  EXPECT_EQ(cpu::fp4_packed_at(&byte, 1), 1.0f);
}

}  // namespace
}  // namespace deepinfer
