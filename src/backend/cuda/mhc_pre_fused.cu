// The mHC pre-mix and the sublayer's RMSNorm of a row as one block (decode and prefill alike):
// every thread computes the row's pre weights, mixes its float4 of the hc streams into u, and the
// block normalizes u (row_reduce.cuh) into xn, and its FP8 copy where asked; a second block per row
// computes its post / comb (mhc_rows.cuh, Sinkhorn's 20 serial iterations) at the same time. The
// same operations in the same order as hc_pre's and rms_norm's launches (same bits), two launches
// fewer per sublayer.
#include "backend/cuda/fast_ops.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/mhc_rows.cuh"
#include "backend/cuda/row_reduce.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kHc = 4;

template <bool kQuant>
__global__ void __launch_bounds__(1024)
    hc_pre_norm_kernel(const HcParams q, const float* __restrict__ X, const float* __restrict__ mix,
                       const float* __restrict__ row_ss, float* pre, float* post, float* comb,
                       float* u, const float* w, float eps, float* xn, bool round_in,
                       bool round_out, float* xnq) {
  pdl_begin();
  __shared__ float sh[33];
  const int64_t rows = gridDim.x / 2, d = q.d, n4 = d / 4;
  if (blockIdx.x >= rows) {  // the row's post and comb (Sinkhorn) in a block beside the mix
    if (threadIdx.x < 32)
      hc_pre_row<kHc>(q, mix, row_ss, blockIdx.x - rows, static_cast<int>(threadIdx.x), nullptr,
                      post, comb);
    return;
  }
  const int64_t t = blockIdx.x;
  const float rs = hc_row_rs<kHc>(q, row_ss, t);
  const float* mt = mix + t * (2 + kHc) * kHc;
  float pw[kHc];
#pragma unroll
  for (int j = 0; j < kHc; ++j) pw[j] = hc_pre_weight(q, mt, rs, j);
  if (threadIdx.x < kHc)
    pre[t * kHc + threadIdx.x] = hc_pre_weight(q, mt, rs, static_cast<int>(threadIdx.x));
  const float4* x4 = reinterpret_cast<const float4*>(X + t * kHc * d);
  float4* u4 = reinterpret_cast<float4*>(u + t * d);
  float4 v[kVecMax];
#pragma unroll
  for (int k = 0; k < kVecMax; ++k) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * blockDim.x;
    v[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (i >= n4) continue;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int j = 0; j < kHc; ++j) {  // hc_pre's sum over the streams, in its order
      const float p = pw[j];
      const float4 xv = x4[j * n4 + i];
      acc.x += p * xv.x;
      acc.y += p * xv.y;
      acc.z += p * xv.z;
      acc.w += p * xv.w;
    }
    u4[i] = acc;
    v[k] = round_in ? bf16r4(acc) : acc;
  }
  norm_row4<kQuant>(v, d, w, eps, reinterpret_cast<float4*>(xn + t * d), round_out,
                    reinterpret_cast<float4*>(xnq + (kQuant ? t * d : 0)), sh);
}

}  // namespace

bool hc_pre_norm_fused(Exec& e, const HcParams& p, const float* X, const float* mix, int64_t n,
                       float* pre, float* post, float* comb, float* u, float* row_ss,
                       const float* norm_w, float eps, float* xn, bool round_in, bool round_out,
                       float* xnq) {
  const bool on = fused_rows();
  const int64_t d = p.d;
  // One float4 a thread (so a warp holds a 128-value FP8 block), the row in one block; rows of
  // fewer than 256 take rms_norm's serial body.
  const bool shape = p.hc == kHc && d % 128 == 0 && d >= 256 && d / 4 <= 1024;
  if (!on || e.emulate || !fast_kernels() || !fast_ops() || !row_ss || !shape || n <= 0 ||
      !aligned16(X) || !aligned16(u) || !aligned16(xn) || !aligned16(norm_w) ||
      (xnq && !aligned16(xnq)))
    return false;
  sum_squares_fast(e, X, n, p.hc * d, row_ss);
  // Blocks [0, n): the rows' mixes and norms; [n, 2n): their Sinkhorn beside them.
  const unsigned threads = static_cast<unsigned>(d / 4), rows = static_cast<unsigned>(2 * n);
  if (xnq) {
    e.launch(hc_pre_norm_kernel<true>, rows, threads, 0, p, X, mix, row_ss, pre, post, comb, u,
             norm_w, eps, xn, round_in, round_out, xnq);
  } else {
    e.launch(hc_pre_norm_kernel<false>, rows, threads, 0, p, X, mix, row_ss, pre, post, comb, u,
             norm_w, eps, xn, round_in, round_out, static_cast<float*>(nullptr));
  }
  e.note(cudaGetLastError());
  return true;
}

}  // namespace deepinfer::cuda
