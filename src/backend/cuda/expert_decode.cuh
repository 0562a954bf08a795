// Register decodes of packed expert weights shared by the grouped expert kernels (device only).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace deepinfer::cuda {

// 8 e2m1 codes of one 32-bit word (element i at nibble i) → v[0..7] times 2^-14: the magnitude
// bits placed at fp16 bits 11..9 and the sign at 15 make an fp16 value of exactly 2^-14 times the
// e2m1 value (e = 0 lands on the fp16 denormals), converted exactly. Elements i and
// i + 4 sit 16 bits apart, so one pair of shifts places both halves of an fp16 pair at once
// (11 integer operations and 8 conversions a word, no byte permutes).
__device__ __forceinline__ void e2m1x8(uint32_t q, float* v) {
  const uint32_t mag = 0x0e000e00u, sign = 0x80008000u;
  const uint32_t h[4] = {((q << 9) & mag) | ((q << 12) & sign),
                         ((q << 5) & mag) | ((q << 8) & sign), ((q << 1) & mag) | ((q << 4) & sign),
                         ((q >> 3) & mag) | (q & sign)};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h[i]));
    v[i] = f.x;
    v[i + 4] = f.y;
  }
}

// 8 e2m1 codes of one word → 4 bf16 pairs (elements i, i + 4) times their block scale, exactly:
// fac is the scale 2^(u−127) as the bf16 pair 2^(u−1) (u in [1, 128]); the codes' bits placed at
// bf16 bits 8..6 are the value times 2^−126 (e = 0 lands on the subnormals), and one bf16
// multiply by fac gives value × scale.
__device__ __forceinline__ void e2m1x8_bf16_scaled(uint32_t c, uint32_t fac, uint32_t* out) {
  const uint32_t m = 0x01c001c0u, sg = 0x80008000u;
  const uint32_t w[4] = {((c << 6) & m) | ((c << 12) & sg), ((c << 2) & m) | ((c << 8) & sg),
                         ((c >> 2) & m) | ((c << 4) & sg), ((c >> 6) & m) | (c & sg)};
  const __nv_bfloat162 f = *reinterpret_cast<const __nv_bfloat162*>(&fac);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_bfloat162 v = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&w[i]), f);
    out[i] = *reinterpret_cast<const uint32_t*>(&v);
  }
}

// 8 e2m1 codes of one word → their e4m3 codes times 2^−6, exactly: the magnitude bits (e1 e0 m)
// placed at e4m3 bits 4..2 (so E = e, M = m · 4; e = 0 lands on the e4m3 subnormals) and the sign
// at bit 7. even: codes 0, 2, 4, 6 in bytes 0..3; odd: codes 1, 3, 5, 7. Five integer operations.
__device__ __forceinline__ void e2m1x8_e4m3(uint32_t q, uint32_t& even, uint32_t& odd) {
  even = ((q << 2) & 0x1c1c1c1cu) | ((q << 4) & 0x80808080u);
  odd = ((q >> 2) & 0x1c1c1c1cu) | (q & 0x80808080u);
}

// 4 e4m3 codes of one 32-bit word (element i at byte i) → v[0..3], exactly (through fp16).
__device__ __forceinline__ void e4m3x4(uint32_t u, float* v) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const auto pair = static_cast<__nv_fp8x2_storage_t>((u >> (16 * i)) & 0xffffu);
    const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3)));
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}

// 2 bf16 values of one 32-bit word → v[0..1].
__device__ __forceinline__ void bf16x2(uint32_t u, float* v) {
  v[0] = __uint_as_float(u << 16);
  v[1] = __uint_as_float(u & 0xffff0000u);
}

}  // namespace deepinfer::cuda
