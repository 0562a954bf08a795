// Products with few outputs and long fp32 rows at prefill row counts (the mHC mixes: 24 outputs
// of 16,384 inputs). The 64×64 tiles give such a product one column of blocks — 8 blocks for a
// 512-row chunk — so here a block takes 16 rows × all outputs and stages both operands through
// shared memory in slices of K; a thread owns two outputs of one row.
#include "backend/cuda/gemm_short.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kRows = 16, kOuts = 32, kSlice = 256, kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    short_out_kernel(const float* __restrict__ x, int64_t ldx, int64_t n, DevWeight w,
                     float* __restrict__ y, int64_t ldy) {
  pdl_begin();
  __shared__ float xs[kRows][kSlice + 1], ws[kOuts][kSlice + 1];
  const int tid = threadIdx.x, rl = tid / 16, ol = tid % 16;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const float* wd = reinterpret_cast<const float*>(w.data) + w.row0 * w.stride;
  float acc0 = 0.0f, acc1 = 0.0f;
  for (int64_t k0 = 0; k0 < w.in; k0 += kSlice) {
    const int len = w.in - k0 < kSlice ? static_cast<int>(w.in - k0) : kSlice;
    for (int i = tid; i < kRows * kSlice; i += kThreads) {
      const int rr = i / kSlice, kk = i % kSlice;
      const int64_t row = r0 + rr;
      xs[rr][kk] = row < n && kk < len ? x[row * ldx + k0 + kk] : 0.0f;
    }
    for (int i = tid; i < kOuts * kSlice; i += kThreads) {
      const int oo = i / kSlice, kk = i % kSlice;
      ws[oo][kk] = oo < w.out && kk < len ? wd[oo * w.stride + k0 + kk] : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < kSlice; ++kk) {
      const float xv = xs[rl][kk];
      acc0 += xv * ws[ol][kk];
      acc1 += xv * ws[ol + 16][kk];
    }
    __syncthreads();
  }
  const int64_t row = r0 + rl;
  if (row >= n) return;
  if (ol < w.out) y[row * ldy + ol] = acc0;
  if (ol + 16 < w.out) y[row * ldy + ol + 16] = acc1;
}

// Long launches (≥ kWideMinRows rows: blocks enough to fill the device): a block per 32 rows,
// the K slice split in four quarters over its threads, each thread 4 rows × 4 outputs in
// registers (8 shared loads per 16 FMAs, not 3 per 2), the quarters summed in a fixed order.
constexpr int kWideRows = 32, kWideSlice = 128, kQuarters = 4, kWideMinRows = 4096;

__global__ void __launch_bounds__(kThreads)
    short_out_wide_kernel(const float* __restrict__ x, int64_t ldx, int64_t n, DevWeight w,
                          float* __restrict__ y, int64_t ldy) {
  pdl_begin();
  __shared__ float xs[kWideRows][kWideSlice + 1], ws[kOuts][kWideSlice + 1];
  const int tid = threadIdx.x, kq = tid / 64, ty = tid % 64 / 8, tx = tid % 8;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kWideRows;
  const float* wd = reinterpret_cast<const float*>(w.data) + w.row0 * w.stride;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < w.in; k0 += kWideSlice) {
    const int len = w.in - k0 < kWideSlice ? static_cast<int>(w.in - k0) : kWideSlice;
    for (int i = tid; i < kWideRows * kWideSlice; i += kThreads) {
      const int rr = i / kWideSlice, kk = i % kWideSlice;
      const int64_t row = r0 + rr;
      xs[rr][kk] = row < n && kk < len ? x[row * ldx + k0 + kk] : 0.0f;
    }
    for (int i = tid; i < kOuts * kWideSlice; i += kThreads) {
      const int oo = i / kWideSlice, kk = i % kWideSlice;
      ws[oo][kk] = oo < w.out && kk < len ? wd[oo * w.stride + k0 + kk] : 0.0f;
    }
    __syncthreads();
    const int kb = kq * (kWideSlice / kQuarters);
#pragma unroll 4
    for (int kk = kb; kk < kb + kWideSlice / kQuarters; ++kk) {
      float xv[4], wv[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) xv[q] = xs[4 * ty + q][kk];
#pragma unroll
      for (int j = 0; j < 4; ++j) wv[j] = ws[tx + 8 * j][kk];
#pragma unroll
      for (int q = 0; q < 4; ++q)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[q][j] += xv[q] * wv[j];
    }
    __syncthreads();
  }
  // The quarters' partial sums through shared memory (xs is free now), then one thread per
  // four outputs adds them in quarter order.
  float* part = &xs[0][0];  // [quarter][row][out]: 4 · 32 · 32 floats fit in xs
#pragma unroll
  for (int q = 0; q < 4; ++q)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      part[(kq * kWideRows + 4 * ty + q) * kOuts + tx + 8 * j] = acc[q][j];
  __syncthreads();
  for (int i = tid; i < kWideRows * kOuts; i += kThreads) {
    const int rr = i / kOuts, oo = i % kOuts;
    const int64_t row = r0 + rr;
    if (row >= n || oo >= w.out) continue;
    float v = 0.0f;
#pragma unroll
    for (int q = 0; q < kQuarters; ++q) v += part[(q * kWideRows + rr) * kOuts + oo];
    y[row * ldy + oo] = v;
  }
}

}  // namespace

bool short_out_supported(const DevWeight& w) {
  return w.format == DevFormat::F32 && w.out > 0 && w.out <= kOuts;
}

void gemm_short_out(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w, float* y,
                    int64_t ldy) {
  if (n <= 0) return;
  if (n >= kWideMinRows) {
    e.launch(short_out_wide_kernel, static_cast<unsigned>((n + kWideRows - 1) / kWideRows),
             kThreads, 0, x, ldx, n, w, y, ldy);
    return;
  }
  e.launch(short_out_kernel, static_cast<unsigned>((n + kRows - 1) / kRows), kThreads, 0, x, ldx, n,
           w, y, ldy);
  e.note(cudaGetLastError());
}

}  // namespace deepinfer::cuda
