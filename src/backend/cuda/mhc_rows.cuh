// The mHC pre-mix's per-row matrices of one row as a warp (rows_fast.cu's kernel, the fused
// mHC pre + RMSNorm of mhc_pre_fused.cu): the same bits as the reference body in ops.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/ops.cuh"

namespace deepinfer::cuda {

__device__ inline float hc_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// A row's 1 / RMS over its hc streams (the mixes' scale) from its sum of squares ss.
template <int HC>
__device__ __forceinline__ float hc_rs_of(const HcParams& q, float ss) {
  return 1.0f / sqrtf(ss / static_cast<float>(HC * q.d) + q.rms_eps);
}

template <int HC>
__device__ __forceinline__ float hc_row_rs(const HcParams& q, const float* __restrict__ row_ss,
                                           int64_t t) {
  return hc_rs_of<HC>(q, row_ss[t]);
}

// Stream j's pre-mix weight of row t (mt: the row's mixes, rs: hc_row_rs).
__device__ __forceinline__ float hc_pre_weight_of(float m, float rs, float scale0, float base,
                                                  float hc_eps) {
  return hc_sigmoid(m * rs * scale0 + base) + hc_eps;
}
__device__ __forceinline__ float hc_pre_weight(const HcParams& q, const float* mt, float rs,
                                               int j) {
  return hc_pre_weight_of(mt[j], rs, q.scale[0], q.base[j], q.hc_eps);
}

// A warp per row: lane l < hc·hc holds comb[l / hc][l % hc] (the other lanes mirror lane 0), and
// every row or column sum gathers its hc values by shuffles and adds them in the reference's order.
// pre is not written where null (a caller that computes it itself).
template <int HC>
__device__ __forceinline__ void hc_pre_row(const HcParams& q, const float* __restrict__ mix,
                                           const float* __restrict__ row_ss, int64_t t, int lane,
                                           float* pre, float* post, float* comb) {
  constexpr unsigned kAll = 0xffffffffu;
  constexpr int mixw = (2 + HC) * HC;
  const float rs = hc_row_rs<HC>(q, row_ss, t);
  const float* mt = mix + t * mixw;
  const float eps = q.hc_eps;
  if (lane < HC) {
    if (pre) pre[t * HC + lane] = hc_pre_weight(q, mt, rs, lane);
    post[t * HC + lane] = 2.0f * hc_sigmoid(mt[HC + lane] * rs * q.scale[1] + q.base[HC + lane]);
  }
  const int l = lane < HC * HC ? lane : 0, i = l / HC, j = l % HC;
  float c = mt[2 * HC + l] * rs * q.scale[2] + q.base[2 * HC + l];
  float mx = -INFINITY;
#pragma unroll
  for (int jj = 0; jj < HC; ++jj) mx = fmaxf(mx, __shfl_sync(kAll, c, i * HC + jj));
  c = expf(c - mx);
  float sum = 0.0f;
#pragma unroll
  for (int jj = 0; jj < HC; ++jj) sum += __shfl_sync(kAll, c, i * HC + jj);
  c = c / sum + eps;
  for (int it = 0; it < q.sinkhorn_iters; ++it) {
    if (it > 0) {  // row normalisation
      float s = 0.0f;
#pragma unroll
      for (int jj = 0; jj < HC; ++jj) s += __shfl_sync(kAll, c, i * HC + jj);
      c /= (s + eps);
    }
    float s = 0.0f;  // column normalisation
#pragma unroll
    for (int ii = 0; ii < HC; ++ii) s += __shfl_sync(kAll, c, ii * HC + j);
    c /= (s + eps);
  }
  if (lane < HC * HC) comb[t * HC * HC + lane] = c;
}

}  // namespace deepinfer::cuda
