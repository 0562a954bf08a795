// What a block of a tensor-core GEMV launch works on and how it writes its tile: shared by the
// register-ring kernel (gemv_mma.cu) and the bulk-copy ring kernel (gemv_bulk.cu), so that both
// give the same bits.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

#include "backend/cuda/gemv_group.cuh"
#include "backend/cuda/gemv_mma_step.cuh"

namespace deepinfer::cuda::mma {

struct LaunchJob {
  DevWeight w;
  const float* x;
  int64_t ldx;
  float* y;
  int64_t ldy;
  bool round_out;
  float* yq;  // or null (MmaGemvJob::yq)
};

struct MmaLaunch {
  LaunchJob job[kMaxGemvJobs];
  int first[kMaxGemvJobs + 1];  // job j's first tile (a cluster each)
  int count, n;
  bool full_sectors;  // FP8: each load instruction of a quad covers whole 32-byte sectors
  ExpertJobs ex;
};

// One block's product: its weight, inputs, outputs and first output row t0, and its K slice
// [k0, k0 + slice), the rank-th of the cluster's S.
struct TileJob {
  DevWeight w;
  const float* x;
  int64_t ldx, ldy, t0, k0;
  float* y;
  float* yq;
  bool round_out;
  int n, rank, slice;
  SwigluStage sw;
};

// The job of this block: tile blockIdx / S, slice blockIdx % S. Experts: after pdl_begin(), since
// the slot's expert id (and w2's inputs) come from the launches before; dense launches call it
// themselves once their weight loads are under way.
template <int S, bool kExperts>
__device__ __forceinline__ TileJob tile_job(const MmaLaunch& L) {
  const int tile = static_cast<int>(blockIdx.x) / S;
  TileJob J{};
  J.rank = static_cast<int>(blockIdx.x) % S;
  if constexpr (kExperts) {
    pdl_begin();
    const ExpertJobs& X = L.ex;
    const int job = tile / X.tiles, p = job / X.slots, s = job % X.slots;
    J.w = X.experts[p][X.idx[s]];
    const int64_t xrow = (X.x_per_slot ? s : s / X.per_token) * X.ldx;
    J.x = X.x + xrow;
    if (X.swiglu_h3)
      J.sw = {X.swiglu_h3 + xrow, X.swiglu_row_w ? X.swiglu_row_w + s : nullptr, X.swiglu_limit,
              X.swiglu_official};
    J.ldx = X.ldx;
    J.y = X.y[p] + s * X.ldy;
    J.ldy = X.ldy;
    J.yq = nullptr;
    J.round_out = true;
    J.n = 1;
    J.t0 = static_cast<int64_t>(tile % X.tiles) * kTileRows;
  } else {
    int j = 0;
    while (j + 1 < L.count && tile >= L.first[j + 1]) ++j;
    const LaunchJob& jb = L.job[j];
    J.w = jb.w, J.x = jb.x, J.ldx = jb.ldx, J.y = jb.y, J.ldy = jb.ldy;
    J.round_out = jb.round_out, J.yq = jb.yq;
    J.n = L.n;
    J.t0 = static_cast<int64_t>(tile - L.first[j]) * kTileRows;
  }
  J.slice = static_cast<int>(J.w.in / S);
  J.k0 = static_cast<int64_t>(J.rank) * J.slice;
  return J;
}

// The block's inputs over its K slice staged in shared memory (stage_inputs), then a barrier.
template <DevFormat F>
__device__ __forceinline__ void stage_tile_inputs(const TileJob& J, uint16_t* xh, float* xinv) {
  const SwigluStage sw = J.sw;  // its own copy: a pointer into J would keep all of J in memory
  stage_inputs<F>(J.x, J.ldx, J.n, J.k0, J.slice, xh, xinv, sw.h3 ? &sw : nullptr);
  __syncthreads();
}

// Writes the tile from each lane's mma accumulators (mma_step's acc: rows g and g + 8 of the
// warp's 16, batch rows 2t and 2t + 1); with S > 1 the slices of a cluster are summed in rank
// order through distributed shared memory, each rank writing 1/S of the rows.
template <int S>
__device__ __forceinline__ void finish_tile(const TileJob& J, const float acc[4]) {
  namespace cg = cooperative_groups;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int n = J.n;
  const int64_t t0 = J.t0;
  __shared__ float part[kMaxRows][kTileRows];
  const bool c0_live = 2 * t < n, c1_live = 2 * t + 1 < n;
  const int r_local = warp * 16 + g;
  if (c0_live) part[2 * t][r_local] = acc[0], part[2 * t][r_local + 8] = acc[2];
  if (c1_live) part[2 * t + 1][r_local] = acc[1], part[2 * t + 1][r_local + 8] = acc[3];
  auto finish = [&](int r, int o, float v) {
    if (t0 + o < J.w.out) J.y[r * J.ldy + t0 + o] = J.round_out ? bf16r(v) : v;
  };
  // With yq: every rank sums the whole tile (in the same order, so the same values) and so holds
  // each 128-value block's maximum; it writes its own rows, and their FP8 copy as
  // fp8_quant_kernel would (the block's amax, exact in any order, then the same expressions).
  auto finish_quantized = [&](auto sum_of, int own0, int own) {
    constexpr int kPer = kMaxRows * kTileRows / kThreads;
    __shared__ float block_max[kMaxRows * kTileRows / 32];
    float v[kPer];
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int i = threadIdx.x + k * kThreads;
      v[k] = 0.0f;
      if (i < n * kTileRows) {
        const float sum = sum_of(i / kTileRows, i % kTileRows);
        v[k] = J.round_out ? bf16r(sum) : sum;
      }
      const float m = warp_max(fabsf(v[k]));  // a warp's 32 values lie in one row's block
      if (lane == 0 && i < n * kTileRows) block_max[i / 32] = m;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int i = threadIdx.x + k * kThreads, r = i / kTileRows, o = i % kTileRows;
      if (i >= n * kTileRows || o < own0 || o >= own0 + own || t0 + o >= J.w.out) continue;
      const float* bm = block_max + r * (kTileRows / 32);
      const float s = fp8_act_scale(fmaxf(fmaxf(bm[0], bm[1]), fmaxf(bm[2], bm[3])));
      J.y[r * J.ldy + t0 + o] = v[k];
      J.yq[r * J.ldy + t0 + o] = bf16r(round_e4m3(v[k] / s) * s);
    }
  };
  static_assert(kTileRows == 128, "a tile is one 128-value block of FP8 activations");
  if constexpr (S == 1) {
    __syncthreads();
    if (J.yq) {
      finish_quantized([&](int r, int o) { return part[r][o]; }, 0, kTileRows);
    } else {
      for (int i = threadIdx.x; i < n * kTileRows; i += kThreads)
        finish(i / kTileRows, i % kTileRows, part[i / kTileRows][i % kTileRows]);
    }
  } else {
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();  // every slice's sums written and visible across the cluster
    constexpr int kOwn = kTileRows / S;  // the rows this rank sums
    const int rank = J.rank;
    auto sum_of = [&](int r, int o) {
      float v = 0.0f;
#pragma unroll
      for (int s = 0; s < S; ++s) v += cluster.map_shared_rank(&part[0][0], s)[r * kTileRows + o];
      return v;
    };
    if (J.yq) {
      finish_quantized(sum_of, rank * kOwn, kOwn);
    } else {
      for (int i = threadIdx.x; i < n * kOwn; i += kThreads) {
        const int r = i / kOwn, o = rank * kOwn + i % kOwn;
        finish(r, o, sum_of(r, o));
      }
    }
    cluster.sync();  // the slices' shared memory stays until every rank has read it
  }
}

}  // namespace deepinfer::cuda::mma
