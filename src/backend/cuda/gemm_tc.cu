// Tensor-core GEMM (WMMA bf16 × bf16 → fp32) for the official numerics' FP8/FP4 products with
// more than 8 rows: their inputs are bf16-exact (FP8-quantized activations, or bf16-rounded ones
// for wo_a) and FP8/FP4 weights times power-of-two scales are bf16-exact too, so every product is
// exact and only the fp32 summation order differs from the reference bodies.
#include <cuda_bf16.h>
#include <mma.h>

#include "backend/cuda/gemv.cuh"

namespace deepinfer::cuda {
namespace {

bool g_tensor_cores = false;  // on once measured on the device (kernel_report)

constexpr int kTm = 64, kTn = 64, kTk = 32, kLd = kTk + 8, kLdc = kTn + 4;

__global__ void __launch_bounds__(128)
    gemm_tc_kernel(const float* __restrict__ x, int64_t ldx, int64_t n, DevWeight w,
                   float* __restrict__ y, int64_t ldy, bool round_out) {
  using namespace nvcuda;
  __shared__ __align__(32) __nv_bfloat16 As[kTm * kLd];
  __shared__ __align__(32) __nv_bfloat16 Bs[kTn * kLd];
  __shared__ __align__(32) float Cs[kTm * kLdc];
  const int tid = threadIdx.x, warp = tid / 32, wm = warp / 2, wn = warp % 2;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTm;
  const int64_t o0 = static_cast<int64_t>(blockIdx.x) * kTn;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
  for (int64_t k0 = 0; k0 < w.in; k0 += kTk) {
    for (int i = tid; i < kTm * kTk; i += 128) {
      const int rr = i / kTk, kk = i % kTk;
      const int64_t row = r0 + rr, k = k0 + kk;
      As[rr * kLd + kk] = __float2bfloat16_rn((row < n && k < w.in) ? x[row * ldx + k] : 0.0f);
    }
    for (int i = tid; i < kTn * kTk; i += 128) {
      const int cc = i / kTk, kk = i % kTk;
      const int64_t o = o0 + cc, k = k0 + kk;
      Bs[cc * kLd + kk] = __float2bfloat16_rn((o < w.out && k < w.in) ? w.at(o, k) : 0.0f);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTk; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b[2];
#pragma unroll
      for (int i = 0; i < 2; ++i)
        wmma::load_matrix_sync(a[i], As + (wm * 32 + i * 16) * kLd + kk, kLd);
#pragma unroll
      for (int j = 0; j < 2; ++j)
        wmma::load_matrix_sync(b[j], Bs + (wn * 32 + j * 16) * kLd + kk, kLd);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(Cs + (wm * 32 + i * 16) * kLdc + wn * 32 + j * 16, acc[i][j], kLdc,
                              wmma::mem_row_major);
  __syncthreads();
  for (int i = tid; i < kTm * kTn; i += 128) {
    const int rr = i / kTn, cc = i % kTn;
    const int64_t row = r0 + rr, o = o0 + cc;
    if (row < n && o < w.out) {
      const float v = Cs[rr * kLdc + cc];
      y[row * ldy + o] = round_out ? bf16r(v) : v;
    }
  }
}

}  // namespace

void set_tensor_cores(bool on) { g_tensor_cores = on; }
bool tensor_cores() { return g_tensor_cores; }

void gemm_tc(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w, float* y,
             int64_t ldy, bool round_out) {
  const dim3 grid(static_cast<unsigned>((w.out + kTn - 1) / kTn),
                  static_cast<unsigned>((n + kTm - 1) / kTm));
  gemm_tc_kernel<<<grid, 128, 0, e.stream>>>(x, ldx, n, w, y, ldy, round_out);
  e.note(cudaGetLastError());
}

}  // namespace deepinfer::cuda
