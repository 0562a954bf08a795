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

// round_in / round_out: x bf16-rounded as read, y as written (the official round_bf16 launches
// before and after, folded in).
__global__ void rms_norm_kernel(const float* x, int64_t dim, const float* w, float eps, float* y,
                                bool round_in, bool round_out) {
  pdl_begin();
  __shared__ float sh[kThreads / 32];
  const float* xr = x + blockIdx.x * dim;
  float* yr = y + blockIdx.x * dim;
  auto at = [&](int64_t i) { return round_in ? bf16r(xr[i]) : xr[i]; };
  float ss = 0.0f;
  // Unrolled so a thread's loads are in flight together (the sums keep their order).
#pragma unroll 8
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) ss += at(i) * at(i);
  ss = block_sum(ss, sh);  // its last barrier: every read of x (maybe y) is done
  const float s = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
#pragma unroll 8
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    const float v = w ? w[i] * (at(i) * s) : at(i) * s;
    yr[i] = round_out ? bf16r(v) : v;
  }
}

__global__ void sum_squares_kernel(const float* __restrict__ x, int64_t width, float* ss) {
  pdl_begin();
  __shared__ float sh[kThreads / 32];
  const float* xr = x + blockIdx.x * width;
  float v = 0.0f;
  for (int64_t i = threadIdx.x; i < width; i += kThreads) v += xr[i] * xr[i];
  v = block_sum(v, sh);
  if (threadIdx.x == 0) ss[blockIdx.x] = v;
}

__global__ void argmax_kernel(const float* __restrict__ x, int64_t V, int32_t* out) {
  pdl_begin();
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

// dst rows (stride dim) = the quantized src rows (stride ld); src == dst, ld == dim: in place.
__global__ void fp8_quant_kernel(const float* src, int64_t ld, float* dst, int64_t rows,
                                 int64_t dim, int block, int64_t blocks_per_row) {
  pdl_begin();
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (warp >= rows * blocks_per_row) return;  // uniform across the warp
  const int64_t r = warp / blocks_per_row, b0 = (warp % blocks_per_row) * block;
  const int64_t len = dim - b0 < block ? dim - b0 : block;
  const float* v = src + r * ld + b0;
  float* q = dst + r * dim + b0;
  float amax = 0.0f;
#pragma unroll 4
  for (int64_t i = lane; i < len; i += 32) amax = fmaxf(amax, fabsf(v[i]));
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  const float s = fp8_act_scale(amax);
#pragma unroll 4
  for (int64_t i = lane; i < len; i += 32) q[i] = bf16r(round_e4m3(v[i] / s) * s);
}

}  // namespace

void fp8_quant_rows_fast(Exec& e, float* x, int64_t rows, int64_t dim, int block) {
  fp8_quant_rows_from_fast(e, x, dim, rows, dim, block, x);
}

void fp8_quant_rows_from_fast(Exec& e, const float* src, int64_t ld, int64_t rows, int64_t dim,
                              int block, float* dst) {
  const int64_t per_row = (dim + block - 1) / block;
  const int64_t threads = rows * per_row * 32;
  if (threads <= 0) return;
  e.launch(fp8_quant_kernel, static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads,
           0, src, ld, dst, rows, dim, block, per_row);
  e.note(cudaGetLastError());
}

void rms_norm_fast(Exec& e, const float* x, int64_t rows, int64_t dim, const float* w, float eps,
                   float* y, bool round_in, bool round_out) {
  if (rows <= 0) return;
  e.launch(rms_norm_kernel, static_cast<unsigned>(rows), kThreads, 0, x, dim, w, eps, y, round_in,
           round_out);
  e.note(cudaGetLastError());
}

void sum_squares_fast(Exec& e, const float* x, int64_t rows, int64_t width, float* ss) {
  if (rows <= 0) return;
  e.launch(sum_squares_kernel, static_cast<unsigned>(rows), kThreads, 0, x, width, ss);
  e.note(cudaGetLastError());
}

void argmax_fast(Exec& e, const float* x, int64_t rows, int64_t V, int32_t* out) {
  if (rows <= 0) return;
  e.launch(argmax_kernel, static_cast<unsigned>(rows), kThreads, 0, x, V, out);
  e.note(cudaGetLastError());
}

}  // namespace deepinfer::cuda
