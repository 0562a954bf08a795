// The router's product and the routing of its rows as one launch at decode sizes: the split-K
// column kernel's blocks (a block per expert) write the logits, and the last block to finish
// routes every row (route_row.cuh), instead of a second launch of a block per row. The same
// operations on the same values as gemv then moe_route_fast (the same bits), one launch fewer a
// layer on the routed experts' critical path.
#include "backend/cuda/cuda_model.h"
#include "backend/cuda/exec.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/moe.cuh"
#include "backend/cuda/route_row.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kThreads = 256;  // splitk_column's block; a thread per expert of the routing

template <int R>
__global__ void __launch_bounds__(kThreads)
    gate_route_kernel(const float* __restrict__ x, int64_t ldx, int n, DevWeight w, float* logits,
                      bool round_out, const RouteArgs a, const int32_t* __restrict__ ids,
                      int32_t* idx, float* weights, unsigned* done) {
  pdl_begin();
  splitk_column<R>(x, ldx, n, w, blockIdx.x, logits, a.E, round_out);
  __shared__ bool last;
  __shared__ float biased[kThreads];
  __threadfence();  // this block's logits visible device-wide before it counts itself done
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(done, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();  // every block's logits are visible here (route_row reads them past L1)
  for (int r = 0; r < n; ++r) {
    if (r > 0) __syncthreads();  // the row before has read biased
    route_row(a, ids, logits, idx, weights, r, biased);
  }
  if (threadIdx.x == 0) *done = 0;  // ready for the next launch (graph replays included)
}

}  // namespace

bool gemv_route(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w, float* logits,
                bool round_out, const RouteArgs& a, const int32_t* ids, int32_t* idx,
                float* weights, unsigned* done) {
  if (e.emulate || !fast_kernels() || batch_invariant() || !done || n < 1 || n > 8 ||
      !gemv_supported(w, n) || reinterpret_cast<uintptr_t>(x) % 16 != 0 || ldx % 4 != 0 ||
      w.out != a.E || a.E > kThreads || !moe_route_fast_supported(a) ||
      !gemv_takes_splitk(w, n, x, ldx, round_out))
    return false;
  const unsigned b = static_cast<unsigned>(w.out);
  const int rows = static_cast<int>(n);
  const auto go = [&](auto kernel) {
    e.launch(kernel, b, kThreads, 0, x, ldx, rows, w, logits, round_out, a, ids, idx, weights,
             done);
  };
  if (n == 1) {
    go(gate_route_kernel<1>);
  } else if (n == 2) {
    go(gate_route_kernel<2>);
  } else if (n <= 4) {
    go(gate_route_kernel<4>);
  } else {
    go(gate_route_kernel<8>);
  }
  e.note(cudaGetLastError());
  return true;
}

}  // namespace deepinfer::cuda
