// The MoE routing of a row as one block (a thread per expert): the three reference launches of
// moe.cu (scores, top-k by rank, normalized weights) fused, the same operations in the same order
// on each value, so the same bits. A batch-1 decode step ran those as 12 launches of ~4 µs.
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/moe.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kMaxExperts = 1024;  // a thread per expert

__device__ __forceinline__ float route_score(Scoring scoring, float z) {
  if (scoring == Scoring::Sigmoid) return 1.0f / (1.0f + expf(-z));
  const float sp = z > 20.0f ? z : log1pf(expf(z));
  return sqrtf(sp);
}

__global__ void __launch_bounds__(kMaxExperts)
    route_rows_kernel(const RouteArgs a, const int32_t* __restrict__ ids, float* logits,
                      int32_t* idx, float* weights) {
  pdl_begin();
  extern __shared__ float biased[];  // [E] score + bias, the rank's key
  const int E = a.E, K = a.K, x = threadIdx.x;
  const int64_t r = blockIdx.x;
  float* z = logits + r * E;
  if (x < E) {
    z[x] = route_score(a.scoring, z[x]);
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
  if (x != 0) return;
  float sum = 0.0f;
  for (int k = 0; k < K; ++k) sum += z[idx[r * K + k]];
  const float scale = a.routed_scale / (sum + 1e-20f);
  for (int k = 0; k < K; ++k) weights[r * K + k] = z[idx[r * K + k]] * scale;
}

}  // namespace

bool moe_route_fast_supported(const RouteArgs& a) {
  static const bool on = env_switch("DEEPINFER_CUDA_ROUTE_FUSED", true);
  return on && fast_kernels() && a.scoring != Scoring::Softmax && a.E > 0 && a.E <= kMaxExperts &&
         a.K > 0 && a.K <= a.E;
}

void moe_route_fast(Exec& e, const RouteArgs& a, const int32_t* ids, int64_t n, float* logits,
                    int32_t* idx, float* weights) {
  if (n <= 0) return;
  const unsigned threads = static_cast<unsigned>((a.E + 31) / 32 * 32);
  e.launch(route_rows_kernel, static_cast<unsigned>(n), threads,
           static_cast<size_t>(a.E) * sizeof(float), a, ids, logits, idx, weights);
  e.note(cudaGetLastError());
}

}  // namespace deepinfer::cuda
