// Device pieces the GEMV kernels share (gemv.cu, gemv_row1.cu): the FP8 / FP4 chunk decoders and
// the split-row body (a block of 256 threads per output column).
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/formats.cuh"
#include "backend/cuda/weight_load.cuh"

namespace deepinfer::cuda {

__device__ __forceinline__ void decode(const uint4& q, float* v) {
  // Two e4m3 codes per conversion instruction (exact in fp16).
  const uint32_t u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const auto pair = static_cast<__nv_fp8x2_storage_t>((u[i / 2] >> (16 * (i % 2))) & 0xffffu);
    const __half2 h = __half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3));
    v[2 * i] = __low2float(h);
    v[2 * i + 1] = __high2float(h);
  }
}

__device__ __forceinline__ void decode(const uint2& q, float* v) {
  // e2m1 (sign, 2 exponent bits, 1 mantissa bit) placed at float bits 31 and 24..22 is the value
  // times 2^-126 (e = 0: the denormal m/2 · 2^-126), so one exact multiply restores it.
  const uint32_t u[2] = {q.x, q.y};
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const uint32_t nib = u[i / 8] >> (4 * (i % 8));
    const uint32_t bits = ((nib & 7u) << 22) | ((nib & 8u) << 28);
    v[i] = __uint_as_float(bits) * 0x1p126f;
  }
}

// acc[r] += x[r, k … k + 7] · wv for the rows r < n (R ≥ n), the eight products summed in order.
template <int R>
__device__ __forceinline__ void add_dot8_rows(const float* __restrict__ x, int64_t ldx, int n,
                                              int64_t k, const float* wv, float* acc) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (r < n) {
      const float4* xp = reinterpret_cast<const float4*>(x + r * ldx + k);
      const float4 a = xp[0], b = xp[1];
      acc[r] += a.x * wv[0] + a.y * wv[1] + a.z * wv[2] + a.w * wv[3] + b.x * wv[4] + b.y * wv[5] +
                b.z * wv[6] + b.w * wv[7];
    }
  }
}

// Block b of 256 threads: row r's sum x[r, kb … ke) · w[o, kb … ke) for r < n, returned in
// thread r (0 elsewhere). A thread takes every 2,048th run of 8 values from kb + 8 · thread, its
// products summed in order; the lanes by shuffles, the warps in order. Its shared sums are read
// after its one barrier: a second call in the same kernel needs a __syncthreads() before it.
template <int R>
__device__ __forceinline__ float block_dot_rows(const float* __restrict__ x, int64_t ldx, int n,
                                                const DevWeight& w, int64_t o, int64_t kb,
                                                int64_t ke) {
  constexpr int kWarps = 256 / 32;
  __shared__ float part[R][kWarps];
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    // Unrolled so a thread's loads are in flight together (the sums keep their order).
#pragma unroll 4
  for (int64_t k = kb + threadIdx.x * 8; k < ke; k += 256 * 8) {
    float wv[8];
    load8(w, o, k, wv);
    add_dot8_rows<R>(x, ldx, n, k, wv, acc);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float v = acc[r];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0) part[r][warp] = v;
  }
  __syncthreads();
  float v = 0.0f;
  if (threadIdx.x < R) {
#pragma unroll
    for (int i = 0; i < kWarps; ++i) v += part[threadIdx.x][i];
  }
  return v;
}

// Few output columns, long rows (the mHC mixes, the router, the compressor and indexer heads): a
// block of 256 threads per column splits the row, so the launch still fills the GPU.
template <int R>
__device__ __forceinline__ void splitk_column(const float* __restrict__ x, int64_t ldx, int n,
                                              const DevWeight& w, int64_t o, float* __restrict__ y,
                                              int64_t ldy, bool round_out) {
  const float v = block_dot_rows<R>(x, ldx, n, w, o, 0, w.in);
  if (threadIdx.x < R && static_cast<int>(threadIdx.x) < n)
    y[threadIdx.x * ldy + o] = round_out ? bf16r(v) : v;
}

}  // namespace deepinfer::cuda
