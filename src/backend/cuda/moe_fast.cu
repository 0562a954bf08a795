// Fused MoE steps of a decode step, each the same operations in the same order on each value as
// the reference launches of moe.cu it replaces (the same bits): the routing of a row as one block
// (a thread per expert: scores, top-k by rank, normalized weights; a batch-1 step ran those as 12
// launches of ~4 µs), and the shared expert's SwiGLU with its FP8 copy for w2.
#include "backend/cuda/fast_ops.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/moe.cuh"
#include "backend/cuda/row_reduce.cuh"
#include "backend/cuda/swiglu_value.cuh"

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

// A warp per 128-value block of a row: the SwiGLU of moe.cu's swiglu() (its row weights where
// given), then the block's FP8 copy as fp8_quant_kernel makes it from the written values (amax
// exact in any order).
__global__ void swiglu_quant_kernel(float* h1, const float* __restrict__ h3, int64_t blocks,
                                    int64_t inter, float limit, bool official,
                                    const float* __restrict__ row_w, float* xq) {
  pdl_begin();
  const int64_t b = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (b >= blocks) return;  // uniform across the warp
  float v[4];
  float amax = 0.0f;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int64_t i = b * 128 + lane + 32 * k;
    v[k] = swiglu_value(h1[i], h3[i], limit, row_w ? row_w + i / inter : nullptr, official);
    h1[i] = v[k];
    amax = fmaxf(amax, fabsf(v[k]));
  }
  amax = warp_max(amax);
  const float s = fp8_act_scale(amax);
#pragma unroll
  for (int k = 0; k < 4; ++k) xq[b * 128 + lane + 32 * k] = fp8_act_value(v[k], s);
}

}  // namespace

bool swiglu_quant(Exec& e, float* h1, const float* h3, int64_t rows, int64_t inter, float limit,
                  bool official, float* xq, const float* row_w) {
  const bool on = fused_rows();
  if (!on || e.emulate || !fast_kernels() || inter % 128 != 0) return false;
  const int64_t blocks = rows * inter / 128;
  if (blocks <= 0) return true;
  constexpr int kThreads = 256;
  e.launch(swiglu_quant_kernel, static_cast<unsigned>((blocks * 32 + kThreads - 1) / kThreads),
           kThreads, 0, h1, h3, blocks, inter, limit, official, row_w, xq);
  e.note(cudaGetLastError());
  return true;
}

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
