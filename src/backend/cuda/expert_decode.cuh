// Register decodes of packed expert weights shared by the grouped expert kernels (device only).
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace deepinfer::cuda {

// e2m1 pair (nibbles at bits 0..3 and 16..19 of p) → two floats times 2^-14: the magnitude bits
// placed at fp16 bits 11..9 and the sign at 15 make an fp16 value of exactly 2^-14 times the e2m1
// value (e = 0 lands on the fp16 denormals), converted exactly.
__device__ __forceinline__ float2 e2m1_pair(uint32_t p) {
  const uint32_t h = ((p << 9) & 0x0e000e00u) | ((p << 12) & 0x80008000u);
  return __half22float2(*reinterpret_cast<const __half2*>(&h));
}

// 8 e2m1 codes of one 32-bit word (element i at nibble i) → v[0..7] times 2^-14.
__device__ __forceinline__ void e2m1x8(uint32_t q, float* v) {
  const uint32_t lo = q & 0x0f0f0f0fu, hi = (q >> 4) & 0x0f0f0f0fu;
  const float2 a = e2m1_pair(__byte_perm(lo, 0, 0x4140));  // elements 0, 2
  const float2 b = e2m1_pair(__byte_perm(lo, 0, 0x4342));  // 4, 6
  const float2 c = e2m1_pair(__byte_perm(hi, 0, 0x4140));  // 1, 3
  const float2 d = e2m1_pair(__byte_perm(hi, 0, 0x4342));  // 5, 7
  v[0] = a.x, v[2] = a.y, v[4] = b.x, v[6] = b.y;
  v[1] = c.x, v[3] = c.y, v[5] = d.x, v[7] = d.y;
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
