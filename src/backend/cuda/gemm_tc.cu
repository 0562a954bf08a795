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
                   float* __restrict__ y, int64_t ldy, bool round_out, bool vec) {
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
    if (vec) {  // four inputs per float4 load, eight FP8 codes per 8-byte load (one block scale)
      for (int i = tid; i < kTm * kTk / 4; i += 128) {
        const int rr = i / (kTk / 4), kk = i % (kTk / 4) * 4;
        const int64_t row = r0 + rr;
        float4 v{0, 0, 0, 0};
        if (row < n) v = *reinterpret_cast<const float4*>(x + row * ldx + k0 + kk);
        const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y),
                             hi = __floats2bfloat162_rn(v.z, v.w);
        uint2 packed;
        packed.x = *reinterpret_cast<const uint32_t*>(&lo);
        packed.y = *reinterpret_cast<const uint32_t*>(&hi);
        *reinterpret_cast<uint2*>(As + rr * kLd + kk) = packed;
      }
      for (int i = tid; i < kTn * kTk / 8; i += 128) {
        const int cc = i / (kTk / 8), kk = i % (kTk / 8) * 8;
        const int64_t o = o0 + cc;
        __align__(16) __nv_bfloat16 v[8];
        if (o < w.out) {
          const int64_t r = o + w.row0, k = k0 + kk;
          const uint2 bits = *reinterpret_cast<const uint2*>(w.data + r * w.stride + k);
          const float sc = w.scale_at(r / w.block_out, k / w.block_in);
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const uint32_t word = j < 4 ? bits.x : bits.y;
            v[j] = __float2bfloat16_rn(e4m3_to_float(static_cast<uint8_t>(word >> (8 * (j % 4)))) *
                                       sc);
          }
        } else {
#pragma unroll
          for (int j = 0; j < 8; ++j) v[j] = __float2bfloat16_rn(0.0f);
        }
        *reinterpret_cast<uint4*>(Bs + cc * kLd + kk) = *reinterpret_cast<const uint4*>(v);
      }
    } else {
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
  // The vector loads need FP8 rows of whole 32-wide slices, one scale each, 16-byte aligned x.
  const bool vec = w.format == DevFormat::FP8 && w.in % kTk == 0 && w.block_in % kTk == 0 &&
                   w.stride % 8 == 0 && reinterpret_cast<uintptr_t>(w.data) % 8 == 0 &&
                   reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
  gemm_tc_kernel<<<grid, 128, 0, e.stream>>>(x, ldx, n, w, y, ldy, round_out, vec);
  e.note(cudaGetLastError());
}

}  // namespace deepinfer::cuda
