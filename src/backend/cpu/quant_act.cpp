#include "backend/cpu/quant_act.h"

#include <algorithm>
#include <vector>

#include "backend/cpu/fp4.h"
#include "backend/cpu/fp8.h"

namespace deepinfer::cpu {
namespace {

float block_amax(const float* x, int block) {
  float amax = 0.0f;
  for (int i = 0; i < block; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
}

}  // namespace

void round_bf16(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = round_bf16(x[i]);
}

float fp8_block_scale(float amax) {
  static const float kInvMax = static_cast<float>(1.0 / 448.0);
  return pow2_at_least(std::max(amax, 1e-4f) * kInvMax);
}

void fp8_act_quant(const float* x, int64_t n, int block, uint8_t* codes, float* scales) {
  for (int64_t b0 = 0, bi = 0; b0 < n; b0 += block, ++bi) {
    const int len = static_cast<int>(std::min<int64_t>(block, n - b0));
    const float s = fp8_block_scale(block_amax(x + b0, len));
    scales[bi] = s;
    for (int i = 0; i < len; ++i) {
      codes[b0 + i] = float_to_fp8_e4m3(x[b0 + i] / s);  // saturates at ±448
    }
  }
}

void fp8_act_quant_inplace(float* x, int64_t n, int block) {
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    float* v = x + b0;
    const int len = static_cast<int>(std::min<int64_t>(block, n - b0));
    const float s = fp8_block_scale(block_amax(v, len));
    for (int i = 0; i < len; ++i) v[i] = round_bf16(round_fp8_e4m3(v[i] / s) * s);
  }
}

void fp4_act_quant_inplace(float* x, int64_t n, int block) {
  static const float kInvMax = static_cast<float>(1.0 / 6.0);
  static const float kFloor = static_cast<float>(6.0 * 0x1p-126);
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    float* v = x + b0;
    const int len = static_cast<int>(std::min<int64_t>(block, n - b0));
    const float s = pow2_at_least(std::max(block_amax(v, len), kFloor) * kInvMax);
    for (int i = 0; i < len; ++i) v[i] = round_bf16(round_fp4_e2m1(v[i] / s) * s);
  }
}

void hadamard_rotate_rows(float* x, int64_t rows, int dim) {
  // The butterfly runs in double: for bf16 inputs the partial sums are exact, as in the
  // reference's fp64 matmul against the ±1 matrix.
  thread_local std::vector<double> heap;
  double stack[4096];
  double* buf = stack;
  if (dim > 4096) {
    heap.resize(static_cast<size_t>(dim));
    buf = heap.data();
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * dim;
    for (int i = 0; i < dim; ++i) buf[i] = v[i];
    for (int span = 1; span < dim; span *= 2) {
      for (int i = 0; i < dim; i += 2 * span) {
        for (int j = i; j < i + span; ++j) {
          const double a = buf[j], b = buf[j + span];
          buf[j] = a + b;
          buf[j + span] = a - b;
        }
      }
    }
    for (int i = 0; i < dim; ++i) v[i] = round_bf16(static_cast<float>(buf[i]) * scale);
  }
}

}  // namespace deepinfer::cpu
