// The V4.1 KV storage formats (spec §12.2 item 6) as the engine's blocks hold them: compressed
// rows FP4 e2m1 + E4M3 per 16 (288 B for 512 dims), index keys MXFP4 (68 B for 128), window rows
// FP8 e4m3 + UE8M0 per 32 (528 B for 512); each holds the V4.1 forward's QAT outputs bit for bit,
// including blocks at the scale floor and all-zero blocks.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/quant_act.h"
#include "model/state.h"
#include "model/v41_forward.h"

namespace deepinfer::engine {
namespace {

using model::EntryFormat;

void expect_round_trip(EntryFormat f, const std::vector<float>& row, const char* what) {
  const int dim = static_cast<int>(row.size());
  std::vector<uint8_t> packed(static_cast<size_t>(model::entry_row_bytes(f, dim, 0)));
  std::vector<float> back(row.size(), 1.0f);
  const int64_t before = model::entry_pack_mismatches();
  model::entry_pack(f, row.data(), dim, 0, packed.data());
  model::entry_unpack(f, packed.data(), dim, 0, back.data());
  EXPECT_EQ(model::entry_pack_mismatches(), before) << what;
  for (int i = 0; i < dim; ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(back[static_cast<size_t>(i)]),
              std::bit_cast<uint32_t>(row[static_cast<size_t>(i)]))
        << what << " dim " << i << ": " << row[static_cast<size_t>(i)];
}

std::vector<float> random_row(std::mt19937& rng, int dim, float scale) {
  std::normal_distribution<float> n(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(dim));
  for (float& x : v) x = n(rng);
  return v;
}

TEST(V41KvFormats, RowBytesOfTheSpec) {
  EXPECT_EQ(model::entry_row_bytes(EntryFormat::Fp4E4m3, 512, 64), 256 + 32);
  EXPECT_EQ(model::entry_row_bytes(EntryFormat::Mxfp4, 128, 0), 64 + 4);
  EXPECT_EQ(model::entry_row_bytes(EntryFormat::Fp8B32, 512, 64), 512 + 16);
}

TEST(V41KvFormats, CompressedRowsRoundTrip) {
  std::mt19937 rng(1);
  for (float scale : {1.0f, 30.0f, 1e-3f, 1e-5f, 0.0f}) {  // 1e-5: every block at the floor
    for (int k = 0; k < 50; ++k) {
      std::vector<float> row = random_row(rng, 512, scale);
      if (k == 0) std::fill(row.begin(), row.begin() + 16, 0.0f);          // an all-zero block
      if (k == 1) std::fill(row.begin() + 16, row.begin() + 32, -1e-30f);  // rounds to -0
      model::v41::fp4_e4m3_scaled_inplace(row.data(), 512, 16);
      expect_round_trip(EntryFormat::Fp4E4m3, row, "fp4/e4m3");
    }
  }
}

TEST(V41KvFormats, IndexKeysAndWindowRowsRoundTrip) {
  std::mt19937 rng(2);
  for (float scale : {1.0f, 100.0f, 1e-6f}) {
    for (int k = 0; k < 50; ++k) {
      std::vector<float> key = random_row(rng, 128, scale);
      cpu::fp4_act_quant_inplace(key.data(), 128, 32);
      expect_round_trip(EntryFormat::Mxfp4, key, "mxfp4");
      std::vector<float> win = random_row(rng, 512, scale);
      cpu::fp8_act_quant_inplace(win.data(), 512, 32);
      expect_round_trip(EntryFormat::Fp8B32, win, "fp8/32");
    }
  }
}

// A worked row: one block of 16 with scale 0.25 (E4M3 exact) holds e2m1 codes × 0.25.
TEST(V41KvFormats, Fp4E4m3WorkedBlock) {
  const float codes[16] = {6, -4, 3, 0.5f, 0, -0.0f, 1.5f, 2, -6, 1, -1, 0.5f, -3, 4, -2, -1.5f};
  std::vector<float> row(16);
  for (int i = 0; i < 16; ++i) row[static_cast<size_t>(i)] = codes[i] * 0.25f;
  std::vector<uint8_t> packed(9);
  model::entry_pack(EntryFormat::Fp4E4m3, row.data(), 16, 0, packed.data());
  EXPECT_EQ(packed[0], 0xe7);  // element 0 = +6 (code 7) low nibble, element 1 = -4 (code 0xe)
  EXPECT_EQ(packed[8], 0x28);  // E4M3 0.25 = 2^-2: exponent field 5, mantissa 0
  expect_round_trip(EntryFormat::Fp4E4m3, row, "worked block");
}

}  // namespace
}  // namespace deepinfer::engine
