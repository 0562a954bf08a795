// FP8 e4m3 (float8_e4m3fn) and UE8M0 (float8_e8m0fnu) scalar formats, bit-exact with torch:
// decode of all 256 codes (0x7f/0xff are NaN, no infinities), round-to-nearest-even encode with
// saturation to ±448, and the power-of-two block scales 2^ceil(log2(amax/max)) of DeepSeek V4.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace deepinfer::cpu {

inline constexpr float kFp8E4m3Max = 448.0f;

// e4m3 code → float. NaN codes (exponent 15, mantissa 7) give a quiet NaN with the code's sign.
inline float fp8_e4m3_to_float(uint8_t code) {
  const bool neg = (code & 0x80) != 0;
  const int e = (code >> 3) & 0xf;
  const int m = code & 0x7;
  float v;
  if (e == 0xf && m == 0x7) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<float>(m), -9);  // subnormal: m/8 · 2^-6
  } else {
    v = std::ldexp(static_cast<float>(8 + m), e - 10);  // (1 + m/8) · 2^(e-7)
  }
  return neg ? -v : v;
}

// float → e4m3 code: nearest value, ties to even mantissa, |x| ≥ 448 (and ±inf) saturate to ±448,
// NaN → 0x7f (with the sign). Equals torch's clamp(x, -448, 448).to(torch.float8_e4m3fn).
inline uint8_t float_to_fp8_e4m3(float x) {
  const uint8_t sign = static_cast<uint8_t>((std::bit_cast<uint32_t>(x) >> 24) & 0x80);
  if (std::isnan(x)) return sign | 0x7f;
  const float a = std::fabs(x);
  if (a >= kFp8E4m3Max) return sign | 0x7e;
  if (a < 0x1p-6f) {  // subnormal range, step 2^-9; 8 steps is the smallest normal (code 0x08)
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  int e2 = 0;
  std::frexp(a, &e2);                                                // a = f · 2^e2, f in [0.5, 1)
  int exp = e2 - 1;                                                  // a in [2^exp, 2^(exp+1))
  int q = static_cast<int>(std::nearbyint(std::ldexp(a, 3 - exp)));  // in [8, 16]
  if (q == 16) {
    q = 8;
    ++exp;
  }
  return sign | static_cast<uint8_t>(((exp + 7) << 3) | (q - 8));
}

// Nearest e4m3 value of x as a float (saturating), i.e. decode(encode(x)).
inline float round_fp8_e4m3(float x) { return fp8_e4m3_to_float(float_to_fp8_e4m3(x)); }

// UE8M0 bare exponent → 2^(e-127); 255 is NaN; 0 is 2^-127 (a float subnormal).
inline float ue8m0_to_float(uint8_t e) {
  if (e == 0xff) return std::numeric_limits<float>::quiet_NaN();
  if (e == 0) return std::bit_cast<float>(0x00400000u);  // the subnormal 2^-127
  return std::bit_cast<float>(static_cast<uint32_t>(e) << 23);
}

// 2^ceil(log2(x)) for positive finite x, exponent clamped to [-126, 127] (the official
// fast_round_scale). Returns the power of two as a float.
inline float pow2_at_least(float x) {
  int e2 = 0;
  const float f = std::frexp(x, &e2);  // x = f · 2^e2, f in [0.5, 1)
  int c = (f == 0.5f) ? e2 - 1 : e2;
  if (c < -126) c = -126;
  if (c > 127) c = 127;
  return std::ldexp(1.0f, c);
}

// The UE8M0 code of a power of two produced by pow2_at_least().
inline uint8_t ue8m0_from_pow2(float p) {
  int e2 = 0;
  std::frexp(p, &e2);
  return static_cast<uint8_t>(e2 - 1 + 127);
}

}  // namespace deepinfer::cpu
