// FP4 e2m1 scalar format of DeepSeek V4's routed experts: a nibble s·8 + m with m indexing
// {0, 0.5, 1, 1.5, 2, 3, 4, 6}; two per byte, element 2k in the low nibble and 2k+1 in the high
// nibble; rounding to the nearest value with ties to the even code, saturating at ±6.
#pragma once

#include <cmath>
#include <cstdint>

namespace deepinfer::cpu {

inline constexpr float kFp4E2m1Max = 6.0f;
inline constexpr float kFp4E2m1Values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,
                                             4.0f,  6.0f,  -0.0f, -0.5f, -1.0f, -1.5f,
                                             -2.0f, -3.0f, -4.0f, -6.0f};

inline float fp4_e2m1_to_float(uint8_t nibble) { return kFp4E2m1Values[nibble & 0xf]; }

// Element k of a packed row (bytes hold elements 2j (low nibble) and 2j+1 (high nibble)).
inline float fp4_packed_at(const uint8_t* row, int64_t k) {
  const uint8_t b = row[k >> 1];
  return fp4_e2m1_to_float((k & 1) ? static_cast<uint8_t>(b >> 4) : static_cast<uint8_t>(b & 0xf));
}

// Nearest e2m1 value of x (clamped to ±6), ties to the even code; the sign of x is kept, so a
// negative input that rounds to zero gives -0 (code 8), as the official quantizer does.
inline float round_fp4_e2m1(float x) {
  float a = std::fabs(x);
  if (a > kFp4E2m1Max) a = kFp4E2m1Max;
  const float step = a < 2.0f ? 0.5f : (a < 4.0f ? 1.0f : 2.0f);
  const float r = std::nearbyint(a / step) * step;
  return std::copysign(r, x);
}

// The 4-bit code of round_fp4_e2m1(x) (bit 3 = sign).
inline uint8_t float_to_fp4_e2m1(float x) {
  const float q = round_fp4_e2m1(x);
  const float a = std::fabs(q);
  const int idx = a < 2.0f ? static_cast<int>(a * 2.0f)
                           : (a < 4.0f ? static_cast<int>(a) + 2 : static_cast<int>(a * 0.5f) + 4);
  return static_cast<uint8_t>(idx | (std::signbit(q) ? 8 : 0));
}

}  // namespace deepinfer::cpu
