// Narrow products at decode batch sizes (see gemm_narrow.cuh). Grid: (row groups of R, column
// groups of 32, K slices); the K slices of one (rows, columns) tile form a cluster. Each warp owns
// four of the block's 32 columns over the slice, a lane eight consecutive K per step (the weights
// through load8, block scales applied), so a warp reads each weight row as one coalesced run and
// a thread keeps only R × 4 sums (registers left to keep loads in flight). The lanes' sums are
// added by shuffles, the slices' in cluster-rank order by rank 0 through distributed shared memory.
#include <cooperative_groups.h>

#include <algorithm>

#include "backend/cuda/gemm_narrow.cuh"
#include "backend/cuda/weight_load.cuh"

namespace deepinfer::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kCols = 32, kThreads = 256, kWarps = kThreads / 32, kWarpCols = kCols / kWarps;
constexpr int kStep = kThreads * 8;  // the K a slice takes at least
constexpr int kMaxSlices = 8;        // the portable cluster size

const bool g_narrow = env_switch("DEEPINFER_CUDA_NARROW", true);

template <int R>
__global__ void __launch_bounds__(kThreads)
    narrow_kernel(const float* __restrict__ x, int64_t ldx, int64_t n, DevWeight w,
                  float* __restrict__ y, int64_t ldy, bool round_out, int64_t span) {
  pdl_begin();
  __shared__ float slice_sum[R * kCols];
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank(), slices = cluster.num_blocks();
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * R;
  const int64_t o0 = static_cast<int64_t>(blockIdx.y) * kCols;
  const int64_t kb = static_cast<int64_t>(rank) * span, ke = std::min<int64_t>(w.in, kb + span);
  const int cols = static_cast<int>(std::min<int64_t>(kCols, w.out - o0));
  const int c0 = warp * kWarpCols;  // this warp's columns of the block's 32
  float acc[R][kWarpCols];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int j = 0; j < kWarpCols; ++j) acc[r][j] = 0.0f;
#pragma unroll 2
  for (int64_t k = kb + lane * 8; k < ke; k += 32 * 8) {
    float xv[R][8];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (r0 + r < n) {
        const float4* xp = reinterpret_cast<const float4*>(x + (r0 + r) * ldx + k);
        const float4 a = xp[0], b = xp[1];
        xv[r][0] = a.x, xv[r][1] = a.y, xv[r][2] = a.z, xv[r][3] = a.w;
        xv[r][4] = b.x, xv[r][5] = b.y, xv[r][6] = b.z, xv[r][7] = b.w;
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) xv[r][i] = 0.0f;
      }
    }
#pragma unroll
    for (int j = 0; j < kWarpCols; ++j) {
      if (c0 + j < cols) {
        float wv[8];
        load8(w, o0 + c0 + j, k, wv);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float s = 0.0f;
#pragma unroll
          for (int i = 0; i < 8; ++i) s += xv[r][i] * wv[i];
          acc[r][j] += s;
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int j = 0; j < kWarpCols; ++j) {
      float v = acc[r][j];
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
      if (lane == 0) slice_sum[r * kCols + c0 + j] = v;
    }
  }
  cluster.sync();  // every slice's sums written and visible to rank 0
  if (rank == 0 && tid < R * kCols) {
    float v = 0.0f;
    for (unsigned s = 0; s < slices; ++s) v += cluster.map_shared_rank(slice_sum, s)[tid];
    const int64_t row = r0 + tid / kCols;
    const int c = tid % kCols;
    if (row < n && c < cols) y[row * ldy + o0 + c] = round_out ? bf16r(v) : v;
  }
  cluster.sync();  // the other slices' shared memory stays until rank 0 has read it
}

template <int R>
void launch(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w, float* y,
            int64_t ldy, bool round_out, int slices, int64_t span) {
  const dim3 grid(static_cast<unsigned>((n + R - 1) / R),
                  static_cast<unsigned>((w.out + kCols - 1) / kCols),
                  static_cast<unsigned>(slices));
  e.launch_cluster(narrow_kernel<R>, grid, dim3(kThreads), 0,
                   dim3(1, 1, static_cast<unsigned>(slices)), x, ldx, n, w, y, ldy, round_out,
                   span);
}

}  // namespace

bool narrow_supported(const DevWeight& w, int64_t n, const float* x, int64_t ldx) {
  return n > 0 && w.out > 0 && w.in % 8 == 0 && ldx % 4 == 0 &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
         (w.format == DevFormat::F32 || w.format == DevFormat::BF16 || w.block_in % 8 == 0);
}

bool narrow_preferred(const DevWeight& w, int64_t n) {
  // Every row group re-reads the weights (from L2): worth it while they are small.
  const int64_t max_out = w.format == DevFormat::F32 ? 256 : 128;
  return g_narrow && n <= kNarrowMaxRows && w.out <= max_out && w.in >= 2048;
}

void gemm_narrow(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w, float* y,
                 int64_t ldy, bool round_out) {
  if (n <= 0) return;
  // K slices of at least one full step of the block (2,048 values), at most a cluster of 8.
  const int slices = static_cast<int>(std::clamp<int64_t>(w.in / kStep, 1, kMaxSlices));
  const int64_t span = (w.in + slices * 8 - 1) / (slices * 8) * 8;
  if (n >= 128) {
    launch<8>(e, x, ldx, n, w, y, ldy, round_out, slices, span);
  } else if (n >= 64) {
    launch<4>(e, x, ldx, n, w, y, ldy, round_out, slices, span);
  } else if (n >= 32) {
    launch<2>(e, x, ldx, n, w, y, ldy, round_out, slices, span);
  } else {
    launch<1>(e, x, ldx, n, w, y, ldy, round_out, slices, span);
  }
}

}  // namespace deepinfer::cuda
