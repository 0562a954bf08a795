// The tensor-core grouped expert GEMM (moe_grouped.cuh grouped_experts_tc): a block per (64-column
// tile, chunk of ≤ 64 slots of one expert); per 32-wide K slice the chunk's activation rows are
// gathered into shared memory as bf16 and the tile's weights decoded there as bf16 with their
// block scale applied (e2m1 or e4m3 × a power of two is bf16-exact), then 4 warps run WMMA
// 16×16×16 bf16 → fp32 over a 32×32 quarter each. With bf16-exact inputs (official numerics: FP8
// quantized activations) every product is exact and only the summation order differs from the
// reference body; a slot's sum does not depend on the other rows of its tile.
#include <cuda_bf16.h>
#include <mma.h>

#include "backend/cuda/expert_decode.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/moe_grouped.cuh"

namespace deepinfer::cuda {
namespace {

using namespace nvcuda;

constexpr int kTile = 64, kSlice = 32, kLd = kSlice + 8, kLdC = kTile + 4, kThreads = 128;
static_assert(kExpertChunkSlots == kTile, "a chunk is one tile of rows");

using TcArgs = ExpertLaunchArgs;

// 16 weights (o, k … k+15) with their scale, as bf16 (exact), into dst.
template <DevFormat F>
__device__ __forceinline__ void weights16(const DevWeight& w, int64_t o, int64_t k,
                                          __nv_bfloat16* dst) {
  const int64_t r = o + w.row0;
  float v[16];
  if constexpr (F == DevFormat::FP4) {
    const uint2 q = __ldg(reinterpret_cast<const uint2*>(w.data + ((r * w.stride + k) >> 1)));
    e2m1x8(q.x, v);
    e2m1x8(q.y, v + 8);
    const float s = w.scale_at(r, k / w.block_in) * 0x1p14f;
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] *= s;
  } else if constexpr (F == DevFormat::FP8) {
    const uint4 q = __ldg(reinterpret_cast<const uint4*>(w.data + r * w.stride + k));
    e4m3x4(q.x, v);
    e4m3x4(q.y, v + 4);
    e4m3x4(q.z, v + 8);
    e4m3x4(q.w, v + 12);
    const float s = w.scale_at(r / w.block_out, k / w.block_in);
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] *= s;
  } else {
    const uint4* p = reinterpret_cast<const uint4*>(w.data + 2 * (r * w.stride + k));
    const uint4 q0 = __ldg(p), q1 = __ldg(p + 1);
    const uint32_t u[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) bf16x2(u[i], v + 2 * i);
  }
#pragma unroll
  for (int i = 0; i < 16; i += 2)
    *reinterpret_cast<__nv_bfloat162*>(dst + i) = __floats2bfloat162_rn(v[i], v[i + 1]);
}

template <DevFormat F>
__global__ void __launch_bounds__(kThreads) grouped_tc_kernel(TcArgs a) {
  __shared__ __align__(32) __nv_bfloat16 As[kTile][kLd];
  __shared__ __align__(32) __nv_bfloat16 Bs[kTile][kLd];
  __shared__ __align__(32) float Cs[kTile][kLdC];
  __shared__ int32_t slot[kTile];
  const int chunk = blockIdx.y;
  if (chunk >= *a.plan.n_chunks) return;
  const int expert = a.plan.chunks[3 * chunk], first = a.plan.chunks[3 * chunk + 1],
            count = a.plan.chunks[3 * chunk + 2];
  const bool second = static_cast<int>(blockIdx.x) >= a.tiles;
  const ExpertProduct prod = second ? a.b : a.a;
  const DevWeight w = prod.experts[expert];
  const int64_t o0 =
      static_cast<int64_t>(static_cast<int>(blockIdx.x) - (second ? a.tiles : 0)) * kTile;
  const int tid = threadIdx.x, warp = tid >> 5;
  if (tid < kTile) slot[tid] = tid < count ? a.plan.sorted[first + tid] : -1;
  __syncthreads();
  // Each thread stages 16 values of one row of A (activations) and of B (weights) per slice.
  const int row = tid >> 1, kk = (tid & 1) * 16;
  const int s = slot[row];
  const float* xrow = s < 0 ? nullptr : a.x + (a.x_per_slot ? s : s / a.K) * a.in;
  const bool col_ok = o0 + row < a.out;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  const int wr = (warp >> 1) * 32, wc = (warp & 1) * 32;
  for (int64_t k0 = 0; k0 < a.in; k0 += kSlice) {
    if (xrow) {
      const float4* p = reinterpret_cast<const float4*>(xrow + k0 + kk);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float4 v = p[i];
        *reinterpret_cast<__nv_bfloat162*>(&As[row][kk + 4 * i]) = __floats2bfloat162_rn(v.x, v.y);
        *reinterpret_cast<__nv_bfloat162*>(&As[row][kk + 4 * i + 2]) =
            __floats2bfloat162_rn(v.z, v.w);
      }
    } else {
#pragma unroll
      for (int i = 0; i < 16; ++i) As[row][kk + i] = __float2bfloat16_rn(0.0f);
    }
    if (col_ok) {
      weights16<F>(w, o0 + row, k0 + kk, &Bs[row][kk]);
    } else {
#pragma unroll
      for (int i = 0; i < 16; ++i) Bs[row][kk + i] = __float2bfloat16_rn(0.0f);
    }
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < kSlice; ks += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &As[wr + 16 * i][ks], kLd);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &Bs[wc + 16 * j][ks], kLd);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(&Cs[wr + 16 * i][wc + 16 * j], acc[i][j], kLdC, wmma::mem_row_major);
  __syncthreads();
  for (int i = tid; i < count * kTile; i += kThreads) {
    const int r = i / kTile, c = i % kTile;
    if (o0 + c >= a.out) continue;
    const float v = Cs[r][c];
    prod.y[static_cast<int64_t>(slot[r]) * a.ldy + o0 + c] = a.round_out ? bf16r(v) : v;
  }
}

}  // namespace

bool grouped_experts_tc_supported(int64_t in, DevFormat format) {
  return fast_kernels() && in > 0 && in % kSlice == 0 &&
         (format == DevFormat::FP4 || format == DevFormat::FP8 || format == DevFormat::BF16);
}

void grouped_experts_tc(Exec& e, const ExpertPlan& plan, int64_t n_slots, int E, const float* x,
                        bool x_per_slot, int K, const ExpertProduct& a, const ExpertProduct& b,
                        int64_t ldy, int64_t out, int64_t in, bool official, DevFormat format) {
  if (n_slots <= 0) return;
  TcArgs g = expert_launch_args(plan, x, x_per_slot, K, a, b, ldy, out, in, official, format);
  g.tiles = static_cast<int>((out + kTile - 1) / kTile);
  const dim3 grid(static_cast<unsigned>(g.tiles * (b.experts ? 2 : 1)),
                  static_cast<unsigned>(expert_max_chunks(n_slots, E)));
  switch (format) {
    case DevFormat::FP4:
      grouped_tc_kernel<DevFormat::FP4><<<grid, kThreads, 0, e.stream>>>(g);
      break;
    case DevFormat::FP8:
      grouped_tc_kernel<DevFormat::FP8><<<grid, kThreads, 0, e.stream>>>(g);
      break;
    case DevFormat::BF16:
      grouped_tc_kernel<DevFormat::BF16><<<grid, kThreads, 0, e.stream>>>(g);
      break;
    case DevFormat::F32:
      return;
  }
  e.note(cudaGetLastError());
}

}  // namespace deepinfer::cuda
