// Weights in a safetensors file start at any byte offset of the mapping: the F32 and BF16 kernels
// and row decoders must read them at an odd address (no misaligned scalar access under UBSan).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/cpu/weight_view.h"

namespace deepinfer::cpu {
namespace {

// W = [[1, 2, -0.5], [0.25, 3, 0.5]] as bf16 bits.
constexpr uint16_t kBf16[6] = {0x3F80, 0x4000, 0xBF00, 0x3E80, 0x4040, 0x3F00};
constexpr float kF32[6] = {1.0f, 2.0f, -0.5f, 0.25f, 3.0f, 0.5f};

template <class T>
WeightView odd_view(std::vector<unsigned char>& storage, const T (&values)[6], WeightFormat f) {
  storage.assign(1 + sizeof values, 0);
  std::memcpy(storage.data() + 1, values, sizeof values);
  WeightView w;
  w.format = f;
  w.data = storage.data() + 1;
  w.out = 2;
  w.in = 3;
  return w;
}

void expect_reads(const WeightView& w) {
  float row[3];
  dequantize_row(w, 1, row);
  EXPECT_EQ(row[0], 0.25f);
  EXPECT_EQ(row[1], 3.0f);
  EXPECT_EQ(row[2], 0.5f);
  const float x[3] = {1.0f, 1.0f, 2.0f};
  float y[2];
  linear(x, 1, w, y, nullptr);
  EXPECT_EQ(y[0], 2.0f);   // 1 + 2 - 1
  EXPECT_EQ(y[1], 4.25f);  // 0.25 + 3 + 1
}

TEST(UnalignedWeights, Bf16AtOddAddress) {
  std::vector<unsigned char> storage;
  expect_reads(odd_view(storage, kBf16, WeightFormat::BF16));
}

TEST(UnalignedWeights, F32AtOddAddress) {
  std::vector<unsigned char> storage;
  expect_reads(odd_view(storage, kF32, WeightFormat::F32));
}

}  // namespace
}  // namespace deepinfer::cpu
