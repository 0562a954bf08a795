// Block-per-row reductions for the rows the reference bodies walk with one thread (RMSNorm over
// the hidden size, the mHC rows, argmax over the vocabulary).
#include "backend/cuda/gemv.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float block_sum(float v, float* shared) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float t = 0.0f;
  if (threadIdx.x < kThreads / 32) t = shared[threadIdx.x];
  if (warp == 0) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) t += __shfl_xor_sync(0xffffffffu, t, off);
    if (lane == 0) shared[0] = t;
  }
  __syncthreads();
  const float total = shared[0];
  __syncthreads();
  return total;
}

__global__ void rms_norm_kernel(const float* __restrict__ x, int64_t dim, const float* w, float eps,
                                float* y) {
  __shared__ float sh[kThreads / 32];
  const float* xr = x + blockIdx.x * dim;
  float* yr = y + blockIdx.x * dim;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) ss += xr[i] * xr[i];
  ss = block_sum(ss, sh);
  const float s = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) yr[i] = w ? w[i] * (xr[i] * s) : xr[i] * s;
}

__global__ void sum_squares_kernel(const float* __restrict__ x, int64_t width, float* ss) {
  __shared__ float sh[kThreads / 32];
  const float* xr = x + blockIdx.x * width;
  float v = 0.0f;
  for (int64_t i = threadIdx.x; i < width; i += kThreads) v += xr[i] * xr[i];
  v = block_sum(v, sh);
  if (threadIdx.x == 0) ss[blockIdx.x] = v;
}

__global__ void argmax_kernel(const float* __restrict__ x, int64_t V, int32_t* out) {
  __shared__ float bv[kThreads];
  __shared__ int64_t bi[kThreads];
  const float* xr = x + blockIdx.x * V;
  float best = -INFINITY;
  int64_t at = V;
  for (int64_t i = threadIdx.x; i < V; i += kThreads) {
    if (xr[i] > best || at == V) {
      if (at == V || xr[i] > best) {
        best = xr[i];
        at = i;
      }
    }
  }
  bv[threadIdx.x] = best;
  bi[threadIdx.x] = at;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float ov = bv[threadIdx.x + s];
      const int64_t oi = bi[threadIdx.x + s];
      if (oi < V && (bi[threadIdx.x] == V || ov > bv[threadIdx.x] ||
                     (ov == bv[threadIdx.x] && oi < bi[threadIdx.x]))) {
        bv[threadIdx.x] = ov;
        bi[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<int32_t>(bi[0] == V ? 0 : bi[0]);
}

__global__ void fp8_quant_kernel(float* x, int64_t rows, int64_t dim, int block,
                                 int64_t blocks_per_row) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp >= rows * blocks_per_row) return;  // uniform across the warp
  const int64_t r = warp / blocks_per_row, b0 = (warp % blocks_per_row) * block;
  const int64_t len = dim - b0 < block ? dim - b0 : block;
  float* v = x + r * dim + b0;
  float amax = 0.0f;
  for (int64_t i = lane; i < len; i += 32) amax = fmaxf(amax, fabsf(v[i]));
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  const float s = fp8_act_scale(amax);
  for (int64_t i = lane; i < len; i += 32) v[i] = bf16r(round_e4m3(v[i] / s) * s);
}

}  // namespace

void fp8_quant_rows_fast(Exec& e, float* x, int64_t rows, int64_t dim, int block) {
  const int64_t per_row = (dim + block - 1) / block;
  const int64_t threads = rows * per_row * 32;
  if (threads <= 0) return;
  fp8_quant_kernel<<<static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads, 0,
                     e.stream>>>(x, rows, dim, block, per_row);
  e.note(cudaGetLastError());
}

void rms_norm_fast(Exec& e, const float* x, int64_t rows, int64_t dim, const float* w, float eps,
                   float* y) {
  if (rows <= 0) return;
  rms_norm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, e.stream>>>(x, dim, w, eps, y);
  e.note(cudaGetLastError());
}

void sum_squares_fast(Exec& e, const float* x, int64_t rows, int64_t width, float* ss) {
  if (rows <= 0) return;
  sum_squares_kernel<<<static_cast<unsigned>(rows), kThreads, 0, e.stream>>>(x, width, ss);
  e.note(cudaGetLastError());
}

void argmax_fast(Exec& e, const float* x, int64_t rows, int64_t V, int32_t* out) {
  if (rows <= 0) return;
  argmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, e.stream>>>(x, V, out);
  e.note(cudaGetLastError());
}

}  // namespace deepinfer::cuda
