#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdlib>
#include <type_traits>

#include "backend/cuda/cuda_model.h"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/gemv_group.cuh"
#include "backend/cuda/gemv_mma.cuh"
#include "backend/cuda/gemv_row1.cuh"
#include "backend/cuda/ops.cuh"
#include "backend/cuda/weight_load.cuh"

namespace deepinfer::cuda {
namespace {

bool g_fast = true;

template <int R>
__global__ void gemv_kernel(const float* __restrict__ x, int64_t ldx, int n, DevWeight w,
                            float* __restrict__ y, int64_t ldy, bool round_out) {
  pdl_begin();
  const int64_t o = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (o >= w.out) return;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
#pragma unroll 4
  for (int64_t k = lane * 8; k < w.in; k += 256) {
    float wv[8];
    load8(w, o, k, wv);
    add_dot8_rows<R>(x, ldx, n, k, wv, acc);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float v = acc[r];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0 && r < n) y[r * ldy + o] = round_out ? bf16r(v) : v;
  }
}

constexpr int kTm = 64, kTn = 64, kTk = 32;

// Tiled GEMM: a 64×64 output tile per block of 256 threads (4×4 each), weights decoded into shared
// memory as fp32 per 32-wide K slice.
__global__ void gemm_kernel(const float* __restrict__ x, int64_t ldx, int64_t n, DevWeight w,
                            float* __restrict__ y, int64_t ldy, bool round_out) {
  pdl_begin();
  __shared__ float As[kTm][kTk + 1];
  __shared__ float Bs[kTn][kTk + 1];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTm,
                o0 = static_cast<int64_t>(blockIdx.x) * kTn;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < w.in; k0 += kTk) {
    for (int i = tid; i < kTm * kTk; i += 256) {
      const int rr = i / kTk, kk = i % kTk;
      const int64_t row = r0 + rr, k = k0 + kk;
      As[rr][kk] = (row < n && k < w.in) ? x[row * ldx + k] : 0.0f;
    }
    for (int i = tid; i < kTn * kTk; i += 256) {
      const int cc = i / kTk, kk = i % kTk;
      const int64_t o = o0 + cc, k = k0 + kk;
      Bs[cc][kk] = (o < w.out && k < w.in) ? w.at(o, k) : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < kTk; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[ty * 4 + i][kk];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = Bs[tx * 4 + j][kk];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t row = r0 + ty * 4 + i;
    if (row >= n) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t o = o0 + tx * 4 + j;
      if (o < w.out) y[row * ldy + o] = round_out ? bf16r(acc[i][j]) : acc[i][j];
    }
  }
}

__global__ void gemv_experts_kernel(const float* __restrict__ x, bool x_per_slot, int64_t n_slots,
                                    int K, const DevWeight* __restrict__ experts,
                                    const int32_t* __restrict__ idx, float* __restrict__ y,
                                    int64_t ldy, int64_t out, int64_t in, bool official) {
  pdl_begin();
  const int64_t g = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (g >= n_slots * out) return;
  const int64_t s = g / out, o = g % out;
  const DevWeight w = experts[idx[s]];
  const float* xr = x + (x_per_slot ? s : s / K) * in;
  float acc = 0.0f;
  for (int64_t k = lane * 8; k < in; k += 256) {
    float wv[8];
    load8(w, o, k, wv);
    const float4* xp = reinterpret_cast<const float4*>(xr + k);
    const float4 a = xp[0], b = xp[1];
    acc += a.x * wv[0] + a.y * wv[1] + a.z * wv[2] + a.w * wv[3] + b.x * wv[4] + b.y * wv[5] +
           b.z * wv[6] + b.w * wv[7];
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) y[s * ldy + o] = (official && w.quantized()) ? bf16r(acc) : acc;
}

// ---- v2: four output columns per warp (the activation chunk loaded once serves four weight
// rows), 16-byte weight loads: 8 bf16 / 16 fp8 / 16 fp4 (8 bytes) elements per lane per row. A
// chunk lies in one scale block (FP8 128, FP4 32 wide), so its block scale multiplies the chunk's
// partial sum once instead of every weight.
template <DevFormat F>
struct Chunk {
  static constexpr int kElems = (F == DevFormat::BF16 || F == DevFormat::F32) ? 8 : 16;
};

// A packed FP8 / FP4 chunk (16 e4m3 codes, 16 e2m1 nibbles), its block scale and its weights.
template <DevFormat F>
using Packed = std::conditional_t<F == DevFormat::FP8, uint4, uint2>;

template <DevFormat F>
__device__ __forceinline__ Packed<F> load_packed(const DevWeight& w, int64_t o, int64_t k) {
  const int64_t r = o + w.row0;
  if constexpr (F == DevFormat::FP8) {
    return __ldg(reinterpret_cast<const uint4*>(w.data + r * w.stride + k));
  } else {
    return __ldg(reinterpret_cast<const uint2*>(w.data + ((r * w.stride + k) >> 1)));
  }
}

template <DevFormat F>
__device__ __forceinline__ float packed_scale(const DevWeight& w, int64_t o, int64_t k) {
  const int64_t r = o + w.row0;
  if constexpr (F == DevFormat::FP8) return w.scale_at(r / w.block_out, k / w.block_in);
  return w.scale_at(r, k / w.block_in);
}

// The chunk's weights without their block scale, which it returns (1 for bf16 / fp32).
template <DevFormat F>
__device__ __forceinline__ float load_chunk(const DevWeight& w, int64_t o, int64_t k, float* v) {
  if constexpr (F == DevFormat::F32 || F == DevFormat::BF16) {
    load8(w, o, k, v);
    return 1.0f;
  } else {
    decode(load_packed<F>(w, o, k), v);
    return packed_scale<F>(w, o, k);
  }
}

constexpr int kCols = 4;

template <int R, DevFormat F>
__global__ void gemv4_kernel(const float* __restrict__ x, int64_t ldx, int n, DevWeight w,
                             float* __restrict__ y, int64_t ldy, bool round_out) {
  pdl_begin();
  constexpr int E = Chunk<F>::kElems;
  const int64_t o0 = ((static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5) * kCols;
  const int lane = threadIdx.x & 31;
  if (o0 >= w.out) return;
  float acc[R][kCols];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[r][c] = 0.0f;
  for (int64_t k = lane * E; k < w.in; k += 32 * E) {
    float wv[kCols][E], sc[kCols];
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      if (o0 + c < w.out) {
        sc[c] = load_chunk<F>(w, o0 + c, k, wv[c]);
      } else {
        sc[c] = 0.0f;
#pragma unroll
        for (int i = 0; i < E; ++i) wv[c][i] = 0.0f;
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r < n) {
        float xv[E];
        const float4* xp = reinterpret_cast<const float4*>(x + r * ldx + k);
#pragma unroll
        for (int i = 0; i < E / 4; ++i) {
          const float4 a = xp[i];
          xv[4 * i] = a.x, xv[4 * i + 1] = a.y, xv[4 * i + 2] = a.z, xv[4 * i + 3] = a.w;
        }
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          float part = 0.0f;
#pragma unroll
          for (int i = 0; i < E; ++i) part += xv[i] * wv[c][i];
          acc[r][c] += part * sc[c];
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      float v = acc[r][c];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
      if (lane == 0 && r < n && o0 + c < w.out) y[r * ldy + o0 + c] = round_out ? bf16r(v) : v;
    }
  }
}

// One activation row against FP8 / FP4 weights, four columns per warp as gemv4_kernel<1> (the
// same sums in the same order), but the four packed chunks are loaded before any is decoded:
// fewer registers, so more warps and more bytes in flight per SM. A lane's sums over the chunks
// k0, k0 + step, … of columns o0 … o0 + 3.
template <DevFormat F>
__device__ __forceinline__ void row4_sums(const float* __restrict__ x, const DevWeight& w,
                                          int64_t o0, int64_t k0, int64_t step, float* acc) {
  constexpr int E = 16;
#pragma unroll 2
  for (int64_t k = k0; k < w.in; k += step) {
    Packed<F> q[kCols];
    float sc[kCols];
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      if (o0 + c < w.out) {
        q[c] = load_packed<F>(w, o0 + c, k);
        sc[c] = packed_scale<F>(w, o0 + c, k);
      } else {
        q[c] = Packed<F>{};
        sc[c] = 0.0f;
      }
    }
    float xv[E];
    const float4* xp = reinterpret_cast<const float4*>(x + k);
#pragma unroll
    for (int i = 0; i < E / 4; ++i) {
      const float4 a = xp[i];
      xv[4 * i] = a.x, xv[4 * i + 1] = a.y, xv[4 * i + 2] = a.z, xv[4 * i + 3] = a.w;
    }
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      float wv[E];
      decode(q[c], wv);
      float part = 0.0f;
#pragma unroll
      for (int i = 0; i < E; ++i) part += xv[i] * wv[i];
      acc[c] += part * sc[c];
    }
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc[c] += __shfl_xor_sync(0xffffffffu, acc[c], off);
  }
}

// Output o of the row kernels: y[o], and hc_post's outputs of column o where hp.X_out is given.
__device__ __forceinline__ void row_out(float* y, int64_t o, float v, bool round_out,
                                        const HcPostArgs& hp) {
  const float yv = round_out ? bf16r(v) : v;
  y[o] = yv;
  if (hp.X_out) hc_post_column(hp, 0, o, yv);
}

template <DevFormat F>
__global__ void __launch_bounds__(256)
    gemv4_row_kernel(const float* __restrict__ x, DevWeight w, float* __restrict__ y,
                     bool round_out, const HcPostArgs hp) {
  pdl_begin();
  constexpr int E = 16;
  const int64_t o0 = ((static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5) * kCols;
  const int lane = threadIdx.x & 31;
  if (o0 >= w.out) return;
  float acc[kCols] = {};
  row4_sums<F>(x, w, o0, lane * E, 32 * E, acc);
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    if (lane == 0 && o0 + c < w.out) row_out(y, o0 + c, acc[c], round_out, hp);
  }
}

// The row kernel for matrices with too few column groups to fill the GPU (wo_b, the shared
// expert): S warps share each group of four columns, warp s taking every S-th 512-element chunk
// of the row, and their sums are added in slice order through shared memory.
template <DevFormat F, int S>
__global__ void __launch_bounds__(256)
    gemv4_row_split_kernel(const float* __restrict__ x, DevWeight w, float* __restrict__ y,
                           bool round_out, const HcPostArgs hp) {
  pdl_begin();
  constexpr int E = 16, kGroups = 256 / 32 / S;
  __shared__ float part[kGroups][S][kCols];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = warp / S, s = warp % S;
  const int64_t o0 = (static_cast<int64_t>(blockIdx.x) * kGroups + g) * kCols;
  float acc[kCols] = {};
  if (o0 < w.out) row4_sums<F>(x, w, o0, (s * 32 + lane) * E, 32 * E * S, acc);
  if (lane == 0) {
#pragma unroll
    for (int c = 0; c < kCols; ++c) part[g][s][c] = acc[c];
  }
  __syncthreads();
  if (threadIdx.x < kGroups * kCols) {
    const int gi = threadIdx.x / kCols, c = threadIdx.x % kCols;
    const int64_t o = (static_cast<int64_t>(blockIdx.x) * kGroups + gi) * kCols + c;
    float v = 0.0f;
#pragma unroll
    for (int i = 0; i < S; ++i) v += part[gi][i][c];
    if (o < w.out) row_out(y, o, v, round_out, hp);
  }
}

template <int R>
__global__ void __launch_bounds__(256)
    gemv_splitk_kernel(const float* __restrict__ x, int64_t ldx, int n, DevWeight w,
                       float* __restrict__ y, int64_t ldy, bool round_out) {
  pdl_begin();
  splitk_column<R>(x, ldx, n, w, blockIdx.x, y, ldy, round_out);
}

// The products of a group, their columns end to end over the grid (first[j]: job j's first block).
struct SplitRowGroup {
  DevWeight w[kMaxGemvJobs];
  const float* x[kMaxGemvJobs];
  float* y[kMaxGemvJobs];
  int64_t ldy[kMaxGemvJobs];
  int first[kMaxGemvJobs + 1];
  bool round_out[kMaxGemvJobs];
  int count;
};

template <int R>
__global__ void __launch_bounds__(256)
    gemv_splitk_group_kernel(int64_t ldx, int n, const __grid_constant__ SplitRowGroup g) {
  pdl_begin();
  int j = 0;
  while (j + 1 < g.count && static_cast<int>(blockIdx.x) >= g.first[j + 1]) ++j;
  splitk_column<R>(g.x[j], ldx, n, g.w[j], blockIdx.x - g.first[j], g.y[j], g.ldy[j],
                   g.round_out[j]);
}

template <DevFormat F>
__global__ void experts4_kernel(const float* __restrict__ x, bool x_per_slot, int64_t n_slots,
                                int K, const DevWeight* __restrict__ experts,
                                const int32_t* __restrict__ idx, float* __restrict__ y, int64_t ldy,
                                int64_t out, int64_t in, bool official) {
  pdl_begin();
  constexpr int E = Chunk<F>::kElems;
  const int64_t groups = (out + kCols - 1) / kCols;
  const int64_t g = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (g >= n_slots * groups) return;
  const int64_t s = g / groups, o0 = (g % groups) * kCols;
  const DevWeight w = experts[idx[s]];
  const float* xr = x + (x_per_slot ? s : s / K) * in;
  float acc[kCols] = {};
  for (int64_t k = lane * E; k < in; k += 32 * E) {
    float xv[E];
    const float4* xp = reinterpret_cast<const float4*>(xr + k);
#pragma unroll
    for (int i = 0; i < E / 4; ++i) {
      const float4 a = xp[i];
      xv[4 * i] = a.x, xv[4 * i + 1] = a.y, xv[4 * i + 2] = a.z, xv[4 * i + 3] = a.w;
    }
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      if (o0 + c >= out) continue;
      float wv[E];
      const float sc = load_chunk<F>(w, o0 + c, k, wv);
      float part = 0.0f;
#pragma unroll
      for (int i = 0; i < E; ++i) part += xv[i] * wv[i];
      acc[c] += part * sc;
    }
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    float v = acc[c];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0 && o0 + c < out) y[s * ldy + o0 + c] = (official && w.quantized()) ? bf16r(v) : v;
  }
}

// 0: per format, from the device measurements (docs/cuda.md): v2 for FP4, and for FP8 at one row
// (its wider loads win there); v1 otherwise (bf16 streams faster with a warp per column).
int g_version = 0;

// Batches up to this many rows run as GEMV passes of 8 rows; larger ones take cuBLASLt and the
// narrow kernels, which read each weight once instead of once per pass of 8 rows
// (DEEPINFER_CUDA_GEMV_MAX_ROWS overrides it, to measure the crossover; 64 before 2026-12-03).
int g_gemv_max_rows = [] {
  const char* env = std::getenv("DEEPINFER_CUDA_GEMV_MAX_ROWS");
  return env ? std::max(8, std::atoi(env)) : 8;
}();

template <int R>
void launch_gemv4(Exec& e, const float* x, int64_t ldx, int n, const DevWeight& w, float* y,
                  int64_t ldy, bool round_out) {
  constexpr int kThreads = 256;
  const int64_t warps = (w.out + kCols - 1) / kCols;
  const unsigned blocks = static_cast<unsigned>((warps * 32 + kThreads - 1) / kThreads);
  switch (w.format) {
    case DevFormat::F32:
      e.launch(gemv4_kernel<R, DevFormat::F32>, blocks, kThreads, 0, x, ldx, n, w, y, ldy,
               round_out);
      break;
    case DevFormat::BF16:
      e.launch(gemv4_kernel<R, DevFormat::BF16>, blocks, kThreads, 0, x, ldx, n, w, y, ldy,
               round_out);
      break;
    case DevFormat::FP8:
      e.launch(gemv4_kernel<R, DevFormat::FP8>, blocks, kThreads, 0, x, ldx, n, w, y, ldy,
               round_out);
      break;
    case DevFormat::FP4:
      e.launch(gemv4_kernel<R, DevFormat::FP4>, blocks, kThreads, 0, x, ldx, n, w, y, ldy,
               round_out);
      break;
  }
}

// Warps sharing a column group in the one-row kernel: doubled (up to 8) while the launch has
// fewer warps than half of the GPU's 132 SMs x 64 and each still gets a 512-element chunk.
// DEEPINFER_CUDA_GEMV_SPLIT=0: always 1 (gemv4_row_kernel).
int row_split(int64_t groups, int64_t in) {
  static const bool on = env_switch("DEEPINFER_CUDA_GEMV_SPLIT", true);
  int s = 1;
  while (on && s < 8 && groups * s < 132 * 32 && in / 512 >= 2 * s) s *= 2;
  return s;
}

template <DevFormat F>
void launch_row(Exec& e, int split, int64_t groups, const float* x, const DevWeight& w, float* y,
                bool round_out, const HcPostArgs& hp = {}) {
  const auto blocks = [&](int s) { return static_cast<unsigned>((groups * s + 7) / 8); };
  switch (split) {
    case 2:
      e.launch(gemv4_row_split_kernel<F, 2>, blocks(2), 256, 0, x, w, y, round_out, hp);
      break;
    case 4:
      e.launch(gemv4_row_split_kernel<F, 4>, blocks(4), 256, 0, x, w, y, round_out, hp);
      break;
    case 8:
      e.launch(gemv4_row_split_kernel<F, 8>, blocks(8), 256, 0, x, w, y, round_out, hp);
      break;
    default:
      e.launch(gemv4_row_kernel<F>, blocks(1), 256, 0, x, w, y, round_out, hp);
  }
}

// Products with fewer output columns than this and rows at least this long take the split-row
// kernel (a block per column) instead of a warp per column.
constexpr int64_t kSplitKOut = 2048, kSplitKIn = 2048;

int64_t g_mma_min_out = [] {
  const char* v = std::getenv("DEEPINFER_CUDA_GEMV_MMA_MIN_OUT");
  return v ? std::max<int64_t>(1, std::atoll(v)) : int64_t{4096};
}();

// Whether a GEMV pass of n ≤ 8 rows takes the tensor-core GEMV (gemv_mma) for w: official FP8
// products (inputs FP8-quantized or bf16, so exact in the mma's fp16) outside batch-invariant
// mode; split-row shapes keep their kernels, so that a group of them gives the bits of its separate
// products (gemv_group.cuh). At one row products of fewer than 4,096 outputs keep the row kernels
// (DEEPINFER_CUDA_GEMV_MMA_MIN_OUT moves the bound; it was 8,192 until 2026-12-07: H200, cold,
// wo_b 0.0167 vs 0.0186 ms, the shared w2 0.0084 vs 0.0086 on the row kernels, but on the H100
// with the one-row PDL both on the tensor cores measured +0.1 to +3.1 % a step, +1.7 % mean, in 8
// of 8 interleaved pairs). gemv_rows and gemv_row_hc_post both decide by it.
bool gemv_takes_mma(const DevWeight& w, int64_t n, const float* x, int64_t ldx, bool round_out) {
  return round_out && !batch_invariant() && n <= 8 && (n > 1 || w.out >= g_mma_min_out) &&
         gemv_mma_supported(w, n, x, ldx) && !gemv_split_row(w, n, x, ldx);
}

// One pass of at most 8 rows: the GEMV kernel and version per format and row count.
void gemv_rows(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w, float* y,
               int64_t ldy, bool round_out) {
  if (gemv_takes_mma(w, n, x, ldx, round_out)) {
    const MmaGemvJob job{&w, x, ldx, y, ldy, true};
    gemv_mma(e, &job, 1, n);
    return;
  }
  if (n == 1) {
    const int split = gemv_row1_split(w, x);
    if (split > 0) {
      gemv_row1(e, x, w, split, y, round_out);
      return;
    }
  }
  const int rows = static_cast<int>(n);
  // Batch-invariant: the same kernel (so the same sums) for a row at every pass size.
  const bool want_v2 =
      g_version == 2 ||
      (g_version == 0 && (w.format == DevFormat::FP4 ||
                          (w.format == DevFormat::FP8 && (n == 1 || batch_invariant()))));
  const bool v2_ok = want_v2 && w.in % 16 == 0 && ldx % 4 == 0;
  constexpr int kThreads = 256;
  if (w.out < kSplitKOut && w.in >= kSplitKIn) {
    if (gemv_cluster_preferred(w, n, x, ldx)) {  // the mHC mixes: K over a cluster
      gemv_cluster(e, x, ldx, n, w, y, ldy, round_out);
      return;
    }
    const unsigned b = static_cast<unsigned>(w.out);
    if (n == 1) {
      e.launch(gemv_splitk_kernel<1>, b, kThreads, 0, x, ldx, rows, w, y, ldy, round_out);
    } else if (n == 2) {
      e.launch(gemv_splitk_kernel<2>, b, kThreads, 0, x, ldx, rows, w, y, ldy, round_out);
    } else if (n <= 4) {
      e.launch(gemv_splitk_kernel<4>, b, kThreads, 0, x, ldx, rows, w, y, ldy, round_out);
    } else {
      e.launch(gemv_splitk_kernel<8>, b, kThreads, 0, x, ldx, rows, w, y, ldy, round_out);
    }
    return;
  }
  if (v2_ok && n == 1 && !batch_invariant() &&
      (w.format == DevFormat::FP8 || w.format == DevFormat::FP4)) {
    const int64_t warps = (w.out + kCols - 1) / kCols;
    const int split = row_split(warps, w.in);
    if (w.format == DevFormat::FP8) {
      launch_row<DevFormat::FP8>(e, split, warps, x, w, y, round_out);
    } else {
      launch_row<DevFormat::FP4>(e, split, warps, x, w, y, round_out);
    }
    return;
  }
  if (v2_ok) {
    if (n == 1) {
      launch_gemv4<1>(e, x, ldx, rows, w, y, ldy, round_out);
    } else if (n == 2) {
      launch_gemv4<2>(e, x, ldx, rows, w, y, ldy, round_out);
    } else if (n <= 4) {
      launch_gemv4<4>(e, x, ldx, rows, w, y, ldy, round_out);
    } else {
      launch_gemv4<8>(e, x, ldx, rows, w, y, ldy, round_out);
    }
    return;
  }
  const unsigned blocks = static_cast<unsigned>((w.out * 32 + kThreads - 1) / kThreads);
  if (n == 1) {
    e.launch(gemv_kernel<1>, blocks, kThreads, 0, x, ldx, rows, w, y, ldy, round_out);
  } else if (n == 2) {
    e.launch(gemv_kernel<2>, blocks, kThreads, 0, x, ldx, rows, w, y, ldy, round_out);
  } else if (n <= 4) {
    e.launch(gemv_kernel<4>, blocks, kThreads, 0, x, ldx, rows, w, y, ldy, round_out);
  } else {
    e.launch(gemv_kernel<8>, blocks, kThreads, 0, x, ldx, rows, w, y, ldy, round_out);
  }
}

}  // namespace

void set_gemv_mma_min_out(int64_t outputs) { g_mma_min_out = std::max<int64_t>(1, outputs); }
int64_t gemv_mma_min_out() { return g_mma_min_out; }

void set_fast_kernels(bool on) { g_fast = on; }
void set_gemv_version(int v) { g_version = v; }
int gemv_version() { return g_version; }
bool fast_kernels() { return g_fast; }

bool gemv_shape_ok(const DevWeight& w) {
  return w.in % 8 == 0 && (w.format != DevFormat::FP8 || w.block_in % 8 == 0) &&
         (w.format != DevFormat::FP4 || w.block_in % 8 == 0);
}

bool gemv_supported(const DevWeight& w, int64_t n) {
  if (!g_fast || n <= 0) return false;
  if (n > 8) return true;  // GEMV passes or the tiled GEMM: any shape
  return gemv_shape_ok(w);
}

int gemv_max_rows() { return g_gemv_max_rows; }
void set_gemv_max_rows(int rows) { g_gemv_max_rows = std::max(8, rows); }

void gemv(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w, float* y,
          int64_t ldy, bool round_out) {
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
  // Batch-invariant: GEMV passes at every row count (what cuBLASLt does not take ends here).
  if ((n > g_gemv_max_rows && !batch_invariant()) || !aligned || (n > 8 && !gemv_shape_ok(w))) {
    const dim3 grid(static_cast<unsigned>((w.out + kTn - 1) / kTn),
                    static_cast<unsigned>((n + kTm - 1) / kTm));
    e.launch(gemm_kernel, grid, 256, 0, x, ldx, n, w, y, ldy, round_out);
    return;
  }
  // Up to gemv_max_rows rows: passes of 8 over the weights. Each pass streams the packed matrix
  // once (HBM-bound), which beats the 64-row tiles until the batch nears a full tile.
  for (int64_t r0 = 0; r0 < n; r0 += 8)
    gemv_rows(e, x + r0 * ldx, ldx, n - r0 < 8 ? n - r0 : 8, w, y + r0 * ldy, ldy, round_out);
}

bool gemv_row_hc_post(Exec& e, const float* x, const DevWeight& w, float* y, bool round_out,
                      const HcPostArgs& hp) {
  // Where gemv_rows at one row takes the row kernels (launch_row), and nowhere else.
  const bool fp8 = w.format == DevFormat::FP8, fp4 = w.format == DevFormat::FP4;
  const bool row_kernels = g_fast && !e.emulate && !batch_invariant() && hp.X_out &&
                           gemv_shape_ok(w) && (fp8 || fp4) && (g_version == 0 || g_version == 2) &&
                           w.in % 16 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                           !gemv_takes_mma(w, 1, x, w.in, round_out) &&
                           gemv_row1_split(w, x) <= 0 && !(w.out < kSplitKOut && w.in >= kSplitKIn);
  if (!row_kernels) return false;
  const int64_t warps = (w.out + kCols - 1) / kCols;
  const int split = row_split(warps, w.in);
  if (fp8) {
    launch_row<DevFormat::FP8>(e, split, warps, x, w, y, round_out, hp);
  } else {
    launch_row<DevFormat::FP4>(e, split, warps, x, w, y, round_out, hp);
  }
  return true;
}

bool gemv_split_row(const DevWeight& w, int64_t n, const float* x, int64_t ldx) {
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
  return g_fast && n >= 1 && n <= 8 && aligned && gemv_shape_ok(w) && w.out < kSplitKOut &&
         w.in >= kSplitKIn;
}

bool gemv_split_row_group(Exec& e, const float* x, int64_t ldx, int64_t n, const GemvJob* jobs,
                          int count) {
  bool mma = !batch_invariant() && count > 0, quantized = true;
  MmaGemvJob mj[kMaxGemvJobs];
  for (int j = 0; mma && j < count; ++j) {
    const float* xj = jobs[j].x ? jobs[j].x : x;
    mj[j] = {jobs[j].w, xj, ldx, jobs[j].y, jobs[j].ldy, true};
    mma = jobs[j].round_out && gemv_mma_supported(*jobs[j].w, n, xj, ldx);
    quantized = quantized && jobs[j].yq && jobs[j].w->out % 128 == 0;
  }
  if (mma) {
    for (int j = 0; quantized && j < count; ++j) mj[j].yq = jobs[j].yq;
    gemv_mma(e, mj, count, n);
    return quantized;
  }
  if (n == 1 && gemv_row1_on() && !batch_invariant() && g_version == 0) {
    gemv_row1_group(e, x, jobs, count);
    return false;
  }
  SplitRowGroup g{};
  g.count = count;
  int blocks = 0;
  for (int j = 0; j < count; ++j) {
    g.w[j] = *jobs[j].w;
    g.x[j] = jobs[j].x ? jobs[j].x : x;
    g.y[j] = jobs[j].y;
    g.ldy[j] = jobs[j].ldy;
    g.round_out[j] = jobs[j].round_out;
    g.first[j] = blocks;
    blocks += static_cast<int>(jobs[j].w->out);
  }
  g.first[count] = blocks;
  if (blocks == 0) return false;
  const int rows = static_cast<int>(n);
  const unsigned b = static_cast<unsigned>(blocks);
  if (n == 1) {
    e.launch(gemv_splitk_group_kernel<1>, b, 256, 0, ldx, rows, g);
  } else if (n == 2) {
    e.launch(gemv_splitk_group_kernel<2>, b, 256, 0, ldx, rows, g);
  } else if (n <= 4) {
    e.launch(gemv_splitk_group_kernel<4>, b, 256, 0, ldx, rows, g);
  } else {
    e.launch(gemv_splitk_group_kernel<8>, b, 256, 0, ldx, rows, g);
  }
  return false;
}

bool gemv_experts_supported(int64_t n_slots, int64_t in) {
  return g_fast && n_slots > 0 && in % 8 == 0;
}

void gemv_experts(Exec& e, const float* x, bool x_per_slot, int64_t n_slots, int K,
                  const DevWeight* experts, const int32_t* idx, float* y, int64_t ldy, int64_t out,
                  int64_t in, bool official, DevFormat format) {
  constexpr int kThreads = 256;
  if ((g_version == 2 || (g_version == 0 && format != DevFormat::BF16)) && in % 16 == 0) {
    const int64_t warps = n_slots * ((out + kCols - 1) / kCols);
    const unsigned b = static_cast<unsigned>((warps * 32 + kThreads - 1) / kThreads);
#define DI_EXPERTS4(F)                                                                          \
  e.launch(experts4_kernel<F>, b, kThreads, 0, x, x_per_slot, n_slots, K, experts, idx, y, ldy, \
           out, in, official)
    switch (format) {
      case DevFormat::F32:
        DI_EXPERTS4(DevFormat::F32);
        break;
      case DevFormat::BF16:
        DI_EXPERTS4(DevFormat::BF16);
        break;
      case DevFormat::FP8:
        DI_EXPERTS4(DevFormat::FP8);
        break;
      case DevFormat::FP4:
        DI_EXPERTS4(DevFormat::FP4);
        break;
    }
#undef DI_EXPERTS4
    return;
  }
  const unsigned blocks = static_cast<unsigned>((n_slots * out * 32 + kThreads - 1) / kThreads);
  e.launch(gemv_experts_kernel, blocks, kThreads, 0, x, x_per_slot, n_slots, K, experts, idx, y,
           ldy, out, in, official);
}

}  // namespace deepinfer::cuda
