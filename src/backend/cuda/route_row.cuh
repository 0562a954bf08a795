// The routing of one row by one block (a thread per expert): scores in place, top-k of score +
// bias by rank (ties to the lower index), normalized weights. moe_fast.cu's route_rows_kernel
// runs it a block per row; the router's split-K launch runs it in its last block (gemv.cu,
// gemv_route), so the two give the same bits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/moe.cuh"

namespace deepinfer::cuda {

constexpr int kMaxRouteExperts = 1024;  // a thread per expert

__device__ __forceinline__ float route_score(Scoring scoring, float z) {
  if (scoring == Scoring::Sigmoid) return 1.0f / (1.0f + expf(-z));
  const float sp = z > 20.0f ? z : log1pf(expf(z));
  return sqrtf(sp);
}

// Row r of logits [n, E] → scores, idx [n, K], weights [n, K], with ≥ E threads in the block
// (all of them call it: it has barriers). biased: E floats of shared memory. The logits are read
// past L1 (another block of the launch may have written them).
__device__ __forceinline__ void route_row(const RouteArgs& a, const int32_t* __restrict__ ids,
                                          float* logits, int32_t* idx, float* weights, int64_t r,
                                          float* biased) {
  const int E = a.E, K = a.K, x = threadIdx.x;
  float* z = logits + r * E;
  if (x < E) {
    z[x] = route_score(a.scoring, __ldcg(z + x));
    if (!a.hash) biased[x] = z[x] + a.bias[x];
  }
  __syncthreads();
  if (a.hash) {
    if (x < K) idx[r * K + x] = a.tid2eid[int64_t{ids[r]} * K + x];
  } else if (x < E) {
    const float sx = biased[x];
    int rank = 0;
    for (int q = 0; q < E && rank < K; ++q) {
      const float sq = biased[q];
      rank += (sq > sx || (sq == sx && q < x));
    }
    if (rank < K) idx[r * K + rank] = x;
  }
  __syncthreads();  // the scores and picks of every thread are visible to thread 0
  if (x == 0) {
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) sum += z[idx[r * K + k]];
    const float scale = a.routed_scale / (sum + 1e-20f);
    for (int k = 0; k < K; ++k) weights[r * K + k] = z[idx[r * K + k]] * scale;
  }
}

}  // namespace deepinfer::cuda
