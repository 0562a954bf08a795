// Scalar number formats on both sides (host and device), bit-exact with backend/cpu/fp8.h, fp4.h
// and quant_act.h: bf16 rounding, FP8 e4m3 and FP4 e2m1 decode/encode, UE8M0 scales, the
// power-of-two block scales; and DevWeight, one matrix in any shipped format with its scales.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cuda/exec.cuh"

namespace deepinfer::cuda {

DI_HD inline uint32_t f2u(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
DI_HD inline float u2f(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// Whether p may be read as float4 / uint4 (16-byte vector loads).
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// A RoPE pair (a, b) rotated by (c, s): a·c − b·s and b·c + a·s, each a fused multiply-add over
// a rounded product, so every kernel that rotates pairs gives the same bits whatever the
// compiler would contract (rope(), the norm kernels that rotate in their launch).
DI_HD inline float2 rotate_pair(float a, float b, float c, float s) {
#ifdef __CUDA_ARCH__
  return make_float2(__fmaf_rn(a, c, -__fmul_rn(b, s)), __fmaf_rn(b, c, __fmul_rn(a, s)));
#else
  const float bs = b * s, as = a * s;
  return make_float2(std::fma(a, c, -bs), std::fma(b, c, as));
#endif
}

// Nearest bf16 (ties to even) as a float; NaN stays NaN.
DI_HD inline float bf16r(float x) {
  if (x != x) return x;
  uint32_t b = f2u(x);
  b += 0x7fffu + ((b >> 16) & 1u);
  return u2f(b & 0xffff0000u);
}

DI_HD inline float bf16_bits_to_float(uint16_t h) { return u2f(static_cast<uint32_t>(h) << 16); }

// e4m3 code → float (0x7f / 0xff are NaN).
DI_HD inline float e4m3_to_float(uint8_t code) {
  const int e = (code >> 3) & 0xf, m = code & 0x7;
  float v;
  if (e == 0xf && m == 0x7) {
    v = u2f(0x7fc00000u);
  } else if (e == 0) {
    v = static_cast<float>(m) * 0x1p-9f;
  } else {
    v = ldexpf(static_cast<float>(8 + m), e - 10);
  }
  return (code & 0x80) ? -v : v;
}

// Nearest e4m3 value (ties to even, saturating at ±448), as a float.
DI_HD inline float round_e4m3(float x) {
  if (x != x) return x;
  const float a = fabsf(x);
  float r;
  if (a >= 448.0f) {
    r = 448.0f;
  } else if (a < 0x1p-6f) {
    r = rintf(a * 512.0f) * 0x1p-9f;
  } else {
    int e2 = 0;
    frexpf(a, &e2);
    const int exp = e2 - 1;
    const float q = rintf(ldexpf(a, 3 - exp));  // in [8, 16]
    r = ldexpf(q, exp - 3);
  }
  return (f2u(x) & 0x80000000u) ? -r : r;
}

// UE8M0 exponent → 2^(e−127) (0 is the subnormal 2^-127, 255 NaN).
DI_HD inline float ue8m0_to_float(uint8_t e) {
  if (e == 0xff) return u2f(0x7fc00000u);
  if (e == 0) return u2f(0x00400000u);
  return u2f(static_cast<uint32_t>(e) << 23);
}

// 2^ceil(log2(x)) for positive finite x, exponent clamped to [-126, 127].
DI_HD inline float pow2_at_least(float x) {
  const uint32_t b = f2u(x);
  const int E = static_cast<int>((b >> 23) & 0xff);
  int c = E == 0 ? -127 : ((b & 0x7fffffu) == 0 ? E - 127 : E - 126);
  if (c < -126) c = -126;
  if (c > 127) c = 127;
  return u2f(static_cast<uint32_t>(c + 127) << 23);
}

DI_HD inline float e2m1_value(uint32_t nibble) {
  const float mags[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float v = mags[nibble & 7u];
  return (nibble & 8u) ? -v : v;
}

// Nearest e2m1 value (clamped to ±6, ties to even), keeping the sign (−0 for small negatives).
DI_HD inline float round_e2m1(float x) {
  float a = fabsf(x);
  if (a > 6.0f) a = 6.0f;
  const float step = a < 2.0f ? 0.5f : (a < 4.0f ? 1.0f : 2.0f);
  return copysignf(rintf(a / step) * step, x);
}

// The FP8 block scale of an activation block: 2^ceil(log2(max(amax, 1e-4) · fp32(1/448))).
DI_HD inline float fp8_act_scale(float amax) {
  const float inv = static_cast<float>(1.0 / 448.0);
  return pow2_at_least(fmaxf(amax, 1e-4f) * inv);
}

enum class DevFormat : int { F32 = 0, BF16 = 1, FP8 = 2, FP4 = 3 };

// One weight matrix [out, in] in device memory as shipped; rows start at row0 (a sub-view).
struct DevWeight {
  DevFormat format = DevFormat::F32;
  const uint8_t* data = nullptr;
  const uint8_t* scale = nullptr;
  bool scale_f32 = false;
  int64_t out = 0, in = 0, stride = 0, scale_stride = 0, row0 = 0;
  int block_out = 1, block_in = 1;
  bool quantize_input = true;  // official numerics: FP8-quantize x per 1×128 first

  DI_HD bool quantized() const { return format == DevFormat::FP8 || format == DevFormat::FP4; }
  DI_HD float scale_at(int64_t srow, int64_t scol) const {
    const int64_t i = srow * scale_stride + scol;
    if (scale_f32) return reinterpret_cast<const float*>(scale)[i];
    return ue8m0_to_float(scale[i]);
  }
  // Element (o, k) as fp32, scales applied.
  DI_HD float at(int64_t o, int64_t k) const {
    const int64_t r = o + row0;
    switch (format) {
      case DevFormat::F32:
        return reinterpret_cast<const float*>(data)[r * stride + k];
      case DevFormat::BF16:
        return bf16_bits_to_float(reinterpret_cast<const uint16_t*>(data)[r * stride + k]);
      case DevFormat::FP8:
        return e4m3_to_float(data[r * stride + k]) * scale_at(r / block_out, k / block_in);
      case DevFormat::FP4: {
        const uint8_t b = data[(r * stride + k) >> 1];
        return e2m1_value((k & 1) ? (b >> 4) : (b & 0xf)) * scale_at(r, k / block_in);
      }
    }
    return 0.0f;
  }
  DevWeight rows(int64_t r0, int64_t n) const {
    DevWeight v = *this;
    v.row0 = row0 + r0;
    v.out = n;
    return v;
  }
};

}  // namespace deepinfer::cuda
