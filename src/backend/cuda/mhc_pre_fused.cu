// The mHC pre-mix and the sublayer's RMSNorm of a row as one block (decode and prefill alike):
// every thread computes the row's pre weights, mixes its float4 of the hc streams into u, and the
// block normalizes u (row_reduce.cuh) into xn, and its FP8 copy where asked; a second block per row
// computes its post / comb (mhc_rows.cuh, Sinkhorn's 20 serial iterations) at the same time. The
// same operations in the same order as hc_pre's and rms_norm's launches (same bits), two launches
// fewer per sublayer; three where the blocks sum the row's squares themselves.
#include "backend/cuda/fast_ops.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/mhc_rows.cuh"
#include "backend/cuda/row_reduce.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kHc = 4;

// kOwnSs: the blocks also sum the row's squares themselves (instead of a sum_squares_fast launch
// before them), which is the same sum in the same order where that launch would take d / 4
// threads holding kHc float4s each: thread i's float4s are i + k · d / 4, stream k's i-th.
template <bool kQuant, bool kOwnSs>
__global__ void __launch_bounds__(1024)
    hc_pre_norm_kernel(const HcParams q, const float* __restrict__ X, const float* __restrict__ mix,
                       float* row_ss, float* pre, float* post, float* comb, float* u,
                       const float* w, float eps, float* xn, bool round_in, bool round_out,
                       float* xnq) {
  pdl_begin();
  __shared__ float sh[33];
  const int64_t rows = gridDim.x / 2, d = q.d, n4 = d / 4;
  const bool sinkhorn = blockIdx.x >= rows;
  const int64_t t = sinkhorn ? blockIdx.x - rows : blockIdx.x;
  const float4* x4 = reinterpret_cast<const float4*>(X + t * kHc * d);
  // The pre weights' mixes and parameters and the norm weights, loaded before the sums.
  const float* mt = mix + t * (2 + kHc) * kHc;
  float mv[kHc] = {}, bv[kHc] = {}, scale0 = 0.0f;
  float4 wv[kVecMax];
  if (!sinkhorn) {
    scale0 = q.scale[0];
#pragma unroll
    for (int j = 0; j < kHc; ++j) mv[j] = mt[j], bv[j] = q.base[j];
    load_norm_weights4(w, d, kQuant ? 1 : kVecMax, wv);
  }
  float4 xv[kHc];
  float ss = 0.0f;
  if constexpr (kOwnSs) {
    static_assert(kHc == kVecMax, "a thread holds one float4 of each stream");
    load_row4(x4, kHc * n4, false, xv);
    ss = block_sum_any(squares4(xv), sh);
  }
  if (sinkhorn) {  // the row's post and comb (Sinkhorn) in a block beside the mix
    if constexpr (kOwnSs) {
      if (threadIdx.x == 0) row_ss[t] = ss;
      __syncthreads();  // hc_pre_row reads row_ss[t]
    }
    if (threadIdx.x < 32)
      hc_pre_row<kHc>(q, mix, row_ss, t, static_cast<int>(threadIdx.x), nullptr, post, comb);
    return;
  }
  const float rs = kOwnSs ? hc_rs_of<kHc>(q, ss) : hc_row_rs<kHc>(q, row_ss, t);
  float pw[kHc];
#pragma unroll
  for (int j = 0; j < kHc; ++j) pw[j] = hc_pre_weight_of(mv[j], rs, scale0, bv[j], q.hc_eps);
  if (threadIdx.x < kHc) {
#pragma unroll
    for (int j = 0; j < kHc; ++j)
      if (j == static_cast<int>(threadIdx.x)) pre[t * kHc + j] = pw[j];
  }
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
      const float4 x = kOwnSs ? xv[j] : x4[j * n4 + i];  // kOwnSs: one float4 a thread (k = 0)
      acc.x += p * x.x;
      acc.y += p * x.y;
      acc.z += p * x.z;
      acc.w += p * x.w;
    }
    u4[i] = acc;
    v[k] = round_in ? bf16r4(acc) : acc;
  }
  norm_row4_with<kQuant>(v, d, wv, w != nullptr, eps, reinterpret_cast<float4*>(xn + t * d),
                         round_out, reinterpret_cast<float4*>(xnq + (kQuant ? t * d : 0)), sh);
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
  // The rows' sums of squares inside the launch where sum_squares_fast would sum them in the
  // same order (d / 4 threads a row, V4-Flash's 4096), else its launch first.
  // (`DEEPINFER_CUDA_HC_OWN_SS=0`: the launch first always.)
  static const bool own_on = env_switch("DEEPINFER_CUDA_HC_OWN_SS", true);
  const bool own_ss = own_on && sum_squares_threads(X, p.hc * d) == d / 4;
  if (!own_ss) sum_squares_fast(e, X, n, p.hc * d, row_ss);
  // Blocks [0, n): the rows' mixes and norms; [n, 2n): their Sinkhorn beside them.
  const unsigned threads = static_cast<unsigned>(d / 4), rows = static_cast<unsigned>(2 * n);
  const auto go = [&](auto kernel) {
    e.launch(kernel, rows, threads, 0, p, X, mix, row_ss, pre, post, comb, u, norm_w, eps, xn,
             round_in, round_out, xnq);
  };
  if (xnq) {
    own_ss ? go(hc_pre_norm_kernel<true, true>) : go(hc_pre_norm_kernel<true, false>);
  } else {
    own_ss ? go(hc_pre_norm_kernel<false, true>) : go(hc_pre_norm_kernel<false, false>);
  }
  e.note(cudaGetLastError());
  return true;
}

}  // namespace deepinfer::cuda
