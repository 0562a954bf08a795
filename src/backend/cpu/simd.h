// Small vector helpers shared by the CPU kernels: bf16 conversion, alignment-free scalar loads,
// run-time ISA detection, and fp32 dot/axpy loops (AVX2 baseline).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace deepinfer::cpu {

inline float bf16_to_f32(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Round-to-nearest-even fp32 → bf16 (NaN stays NaN).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// Scalar loads from weight storage, which may sit at any byte offset of a mapped checkpoint: a
// memcpy load is defined for every address and compiles to a plain move.
inline uint16_t load_u16(const uint16_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline float load_f32(const float* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void bf16_to_f32_row(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(load_u16(in + i));
}

bool cpu_has_avx512();

float dot(const float* a, const float* b, int64_t n);
// y += a·x
void axpy(float a, const float* x, float* y, int64_t n);

}  // namespace deepinfer::cpu
