// Few fp32 output columns over very long rows at decode batch sizes (the mHC mixes: 24 × 16,384):
// a block per (column, K slice of 2,048), the slices of a column one thread-block cluster. A
// thread loads its 8 weights and each row's 8 inputs at once, so a block is one round trip to
// memory instead of the block-per-column kernel's 8 (24 blocks each streaming 64 KB of weights
// and 64 KB per row of inputs were latency-bound at ~0.3 TB/s). Sums: a thread's 8 products in
// order, the lanes by shuffles, the warps in order, the slices in rank order by rank 0 through
// distributed shared memory. The order depends on the shape alone (batch-invariant).
#include <cooperative_groups.h>

#include <algorithm>

#include "backend/cuda/gemv.cuh"
#include "backend/cuda/gemv_device.cuh"

namespace deepinfer::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 256;
constexpr int64_t kSliceIn = kThreads * 8;  // the K of one slice: one load step a thread
constexpr int kMaxSlices = 8;               // the portable cluster size

const bool g_on = env_switch("DEEPINFER_CUDA_GEMV_CLUSTER", true);

template <int R>
__global__ void __launch_bounds__(kThreads)
    gemv_cluster_kernel(const float* __restrict__ x, int64_t ldx, int n, DevWeight w,
                        float* __restrict__ y, int64_t ldy, bool round_out) {
  static_assert(kThreads == 256, "block_dot_rows' block");
  pdl_begin();
  __shared__ float slice_sum[R];
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank(), slices = cluster.num_blocks();
  const int64_t o = blockIdx.x / slices;
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t span = (w.in + slices - 1) / slices;
  const int64_t kb = rank * span, ke = std::min<int64_t>(w.in, kb + span);
  const float v = block_dot_rows<R>(x, ldx, n, w, o, kb, ke);
  if (tid < R) slice_sum[tid] = v;
  cluster.sync();  // every slice's sums written and visible to rank 0
  if (rank == 0 && tid < R && tid < n) {
    float sum = 0.0f;
    for (unsigned s = 0; s < slices; ++s) sum += cluster.map_shared_rank(slice_sum, s)[tid];
    y[tid * ldy + o] = round_out ? bf16r(sum) : sum;
  }
  cluster.sync();  // the other slices' shared memory stays until rank 0 has read it
}

template <int R>
void launch(Exec& e, const float* x, int64_t ldx, int n, const DevWeight& w, float* y, int64_t ldy,
            bool round_out, int slices) {
  e.launch_cluster(gemv_cluster_kernel<R>, dim3(static_cast<unsigned>(w.out * slices)),
                   dim3(kThreads), 0, dim3(static_cast<unsigned>(slices), 1, 1), x, ldx, n, w, y,
                   ldy, round_out);
}

}  // namespace

bool gemv_cluster_preferred(const DevWeight& w, int64_t n, const float* x, int64_t ldx) {
  // fp32 weights only: the quantized and bf16 split-row shapes also run inside group launches
  // (gemv_group.cuh), whose bits must stay those of the block-per-column body.
  return g_on && n >= 1 && n <= 8 && w.format == DevFormat::F32 && w.out > 0 && w.out < 128 &&
         w.in >= 4 * kSliceIn && w.in % 8 == 0 && ldx % 4 == 0 &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

void gemv_cluster(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w, float* y,
                  int64_t ldy, bool round_out) {
  // Slices of ≥ 2,048 values whose bounds are multiples of 8 (span rounds up to one).
  int slices = static_cast<int>(std::clamp<int64_t>(w.in / kSliceIn, 1, kMaxSlices));
  while (slices > 1 && (w.in + slices - 1) / slices % 8 != 0) --slices;
  const int rows = static_cast<int>(n);
  if (n == 1) {
    launch<1>(e, x, ldx, rows, w, y, ldy, round_out, slices);
  } else if (n == 2) {
    launch<2>(e, x, ldx, rows, w, y, ldy, round_out, slices);
  } else if (n <= 4) {
    launch<4>(e, x, ldx, rows, w, y, ldy, round_out, slices);
  } else {
    launch<8>(e, x, ldx, rows, w, y, ldy, round_out, slices);
  }
}

}  // namespace deepinfer::cuda
