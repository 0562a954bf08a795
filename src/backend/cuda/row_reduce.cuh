// Block-per-row pieces of the float4 row kernels (reduce.cu, mhc_pre_fused.cu): a block of up to
// 1,024 threads per row, each holding its ≤ kVecMax float4s in registers, so all of a row's loads
// are in flight at once and y is written without re-reading x. The thread count depends on the
// row width alone: a row's sum order does not depend on the launch's row count (batch-invariant),
// and every kernel built from these pieces sums a row in the same order (same bits).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/formats.cuh"

namespace deepinfer::cuda {

constexpr int kVecMax = 4;

// The warp's maximum of v, in every lane (exact in any order).
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
// The maximum of v over each half-warp (lanes 0–15, 16–31), in every lane.
__device__ __forceinline__ float half_warp_max(float v) {
#pragma unroll
  for (int off = 8; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// The warp's sum of v by xor shuffles (offsets 16 … 1), in every lane.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// The block's sum of v, warp sums by shuffles, then warp 0 over the warp sums; shared ≥ 33 floats.
// Ends on a barrier: every thread's reads before the call are done when it returns.
__device__ __forceinline__ float block_sum_any(float v, float* shared) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float t = lane < warps ? shared[lane] : 0.0f;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) t += __shfl_xor_sync(0xffffffffu, t, off);
    if (lane == 0) shared[32] = t;
  }
  __syncthreads();
  return shared[32];
}

__device__ __forceinline__ float4 bf16r4(float4 v) {
  return make_float4(bf16r(v.x), bf16r(v.y), bf16r(v.z), bf16r(v.w));
}

// A thread's sum of squares over its float4s, in their order.
__device__ __forceinline__ float squares4(const float4 (&v)[kVecMax]) {
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kVecMax; ++k)
    ss += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
  return ss;
}

// Loads a thread's float4s of row xr (n4 of them, stride blockDim.x; zeros past the row),
// bf16-rounded when asked.
__device__ __forceinline__ void load_row4(const float4* xr, int64_t n4, bool round_in,
                                          float4 (&v)[kVecMax]) {
#pragma unroll
  for (int k = 0; k < kVecMax; ++k) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    v[k] = i < n4 ? xr[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (round_in) v[k] = bf16r4(v[k]);
  }
}

// A thread's float4s of the norm weight w (as norm_row4 takes them; zeros past the row or with
// no w), loaded ahead of the block's sums so that their round trip overlaps them.
__device__ __forceinline__ void load_norm_weights4(const float* w, int64_t dim, int vecs,
                                                   float4 (&wv)[kVecMax]) {
  const float4* w4 = reinterpret_cast<const float4*>(w);
#pragma unroll
  for (int k = 0; k < kVecMax; ++k) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    wv[k] = w && k < vecs && i < dim / 4 ? w4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

// The RMSNorm of a row held as v (its n4 = dim / 4 float4s over the block): y = w · v / rms with
// wv = load_norm_weights4(w) (has_w: w is given), bf16-rounded when asked; kQuant: yq also gets
// y's FP8 fake-quantized copy in 128-value blocks (fp8_quant_kernel's rounding of the same
// values), which needs one float4 a thread so that a warp holds one block. shared ≥ 33 floats.
template <bool kQuant>
__device__ __forceinline__ void norm_row4_with(const float4 (&v)[kVecMax], int64_t dim,
                                               const float4 (&wv)[kVecMax], bool has_w, float eps,
                                               float4* yr, bool round_out, float4* yqr,
                                               float* shared) {
  const int64_t n4 = dim / 4;
  const float ss = block_sum_any(squares4(v), shared);
  const float s = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
#pragma unroll
  for (int k = 0; k < (kQuant ? 1 : kVecMax); ++k) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    if (i >= n4) break;
    float4 o = make_float4(v[k].x * s, v[k].y * s, v[k].z * s, v[k].w * s);
    if (has_w) {
      const float4 g = wv[k];
      o = make_float4(g.x * o.x, g.y * o.y, g.z * o.z, g.w * o.w);
    }
    if (round_out) o = bf16r4(o);
    yr[i] = o;
    if constexpr (kQuant) {
      float amax = fmaxf(fmaxf(fabsf(o.x), fabsf(o.y)), fmaxf(fabsf(o.z), fabsf(o.w)));
      amax = warp_max(amax);
      const float q = fp8_act_scale(amax);
      yqr[i] = make_float4(bf16r(round_e4m3(o.x / q) * q), bf16r(round_e4m3(o.y / q) * q),
                           bf16r(round_e4m3(o.z / q) * q), bf16r(round_e4m3(o.w / q) * q));
    }
  }
}

// norm_row4_with, the weights loaded first.
template <bool kQuant>
__device__ __forceinline__ void norm_row4(const float4 (&v)[kVecMax], int64_t dim, const float* w,
                                          float eps, float4* yr, bool round_out, float4* yqr,
                                          float* shared) {
  float4 wv[kVecMax];
  load_norm_weights4(w, dim, kQuant ? 1 : kVecMax, wv);
  norm_row4_with<kQuant>(v, dim, wv, w != nullptr, eps, yr, round_out, yqr, shared);
}

}  // namespace deepinfer::cuda
