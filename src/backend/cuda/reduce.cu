// Block-per-row reductions for the rows the reference bodies walk with one thread (RMSNorm over
// the hidden size, the mHC rows, argmax over the vocabulary).
#include <cooperative_groups.h>

#include "backend/cuda/gemv.cuh"
#include "backend/cuda/row_reduce.cuh"

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

// The float4 row kernels (row_reduce.cuh; a batch-1 decode's RMSNorm was a 7 µs walk of 256
// threads). kQuant: yq also gets y's FP8 copy (norm_row4).
template <bool kQuant>
__global__ void __launch_bounds__(1024)
    rms_norm_vec_kernel(const float* x, int64_t dim, const float* w, float eps, float* y,
                        bool round_in, bool round_out, float* yq) {
  pdl_begin();
  __shared__ float sh[33];
  float4 v[kVecMax];
  load_row4(reinterpret_cast<const float4*>(x + blockIdx.x * dim), dim / 4, round_in, v);
  // norm_row4's first barrier: every read of x (maybe y) is done before y is written.
  norm_row4<kQuant>(v, dim, w, eps, reinterpret_cast<float4*>(y + blockIdx.x * dim), round_out,
                    reinterpret_cast<float4*>(yq + (kQuant ? blockIdx.x * dim : 0)), sh);
}

__global__ void __launch_bounds__(1024)
    sum_squares_vec_kernel(const float* __restrict__ x, int64_t width, float* ss) {
  pdl_begin();
  __shared__ float sh[33];
  float4 v[kVecMax];
  load_row4(reinterpret_cast<const float4*>(x + blockIdx.x * width), width / 4, false, v);
  const float t = block_sum_any(squares4(v), sh);
  if (threadIdx.x == 0) ss[blockIdx.x] = t;
}

// Threads for a row of dim floats on the float4 kernels, 0 where they do not apply.
int vec_threads(const void* a, const void* b, const void* c, int64_t dim) {
  static const bool on = env_switch("DEEPINFER_CUDA_ROW_VEC", true);
  const auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  if (!on || dim % 4 != 0 || dim > 4 * kVecMax * 1024 || !aligned(a) || !aligned(b) || !aligned(c))
    return 0;
  const int64_t per_thread = (dim / 4 + 1023) / 1024;  // float4s a thread holds at 1,024 threads
  const int64_t threads = (dim / 4 + per_thread - 1) / per_thread;
  return static_cast<int>((threads + 31) / 32 * 32);
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

// (v, i) beats the best so far (bv, bi) when there is none yet (bi == V), v is larger, or equal
// with a lower index: the first maximum, whatever order the candidates come in.
__device__ __forceinline__ bool beats(float v, int64_t i, float bv, int64_t bi, int64_t V) {
  return i < V && (bi == V || v > bv || (v == bv && i < bi));
}

// The best of (v, i) and (best, at), kept in (best, at).
__device__ __forceinline__ void keep_best(float v, int64_t i, float& best, int64_t& at, int64_t V) {
  if (beats(v, i, best, at, V)) {
    best = v;
    at = i;
  }
}

// A thread's best over float4s lo + threadIdx.x, … (stride kArgThreads) below hi.
template <int kStride>
__device__ __forceinline__ void scan4(const float4* x4, int64_t lo, int64_t hi, float& best,
                                      int64_t& at, int64_t V) {
#pragma unroll 4
  for (int64_t i = lo + threadIdx.x; i < hi; i += kStride) {
    const float4 v = x4[i];
    keep_best(v.x, 4 * i, best, at, V);
    keep_best(v.y, 4 * i + 1, best, at, V);
    keep_best(v.z, 4 * i + 2, best, at, V);
    keep_best(v.w, 4 * i + 3, best, at, V);
  }
}

// The warp's best, in every lane.
__device__ __forceinline__ void warp_best(float& best, int64_t& at, int64_t V) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, off);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, at, off);
    keep_best(ov, oi, best, at, V);
  }
}

// A block of 1,024 threads per row, float4 loads four at a time (a batch-1 decode has one row: its
// 129,280 logits were a 28 µs serial walk for 256 threads).
constexpr int kArgThreads = 1024;

__global__ void __launch_bounds__(kArgThreads)
    argmax_kernel(const float* __restrict__ x, int64_t V, bool vec4, int32_t* out) {
  pdl_begin();
  __shared__ float bv[kArgThreads / 32];
  __shared__ int64_t bi[kArgThreads / 32];
  const float* xr = x + blockIdx.x * V;
  float best = -INFINITY;
  int64_t at = V;
  if (vec4) {
    scan4<kArgThreads>(reinterpret_cast<const float4*>(xr), 0, V / 4, best, at, V);
  } else {
    for (int64_t i = threadIdx.x; i < V; i += kArgThreads) keep_best(xr[i], i, best, at, V);
  }
  warp_best(best, at, V);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    bv[warp] = best;
    bi[warp] = at;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < kArgThreads / 32; ++w) {
    if (beats(bv[w], bi[w], bv[0], bi[0], V)) {
      bv[0] = bv[w];
      bi[0] = bi[w];
    }
  }
  out[blockIdx.x] = static_cast<int32_t>(bi[0] == V ? 0 : bi[0]);
}

// The same argmax over a cluster of kArgSlices blocks per row, each a contiguous slice of the
// float4s, rank 0 merging the slices' winners through distributed shared memory: one block's ~20
// GB/s left the 0.5 MB of a batch-1 step's logits at 26 µs. The first maximum is order-free, so the
// result equals the one-block kernel's.
constexpr int kArgSlices = 8;  // the portable cluster size

__global__ void __launch_bounds__(kArgThreads)
    argmax_cluster_kernel(const float* __restrict__ x, int64_t V, int32_t* out) {
  pdl_begin();
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  __shared__ float bv[kArgThreads / 32];
  __shared__ int64_t bi[kArgThreads / 32];
  const unsigned rank = cluster.block_rank();
  const float4* x4 = reinterpret_cast<const float4*>(x + blockIdx.y * V);
  const int64_t n4 = V / 4, per = (n4 + kArgSlices - 1) / kArgSlices;
  const int64_t lo = rank * per, hi = lo + per < n4 ? lo + per : n4;
  float best = -INFINITY;
  int64_t at = V;
  scan4<kArgThreads>(x4, lo, hi, best, at, V);
  warp_best(best, at, V);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    bv[warp] = best;
    bi[warp] = at;
  }
  cluster.sync();  // every slice's warp winners written and visible to rank 0
  if (rank == 0 && warp == 0) {
    best = -INFINITY;
    at = V;
    for (unsigned s = 0; s < kArgSlices; ++s) {
      keep_best(cluster.map_shared_rank(bv, s)[lane], cluster.map_shared_rank(bi, s)[lane], best,
                at, V);
    }
    warp_best(best, at, V);
    if (lane == 0) out[blockIdx.y] = static_cast<int32_t>(at == V ? 0 : at);
  }
  cluster.sync();  // the slices' shared memory stays until rank 0 has read it
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
  amax = warp_max(amax);
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
  // Rows are independent and y is written after the whole row is read, so x == y is fine (the
  // row's dim and alignment of x, y and w alone pick the kernel).
  if (const int t = vec_threads(x, y, w, dim); t > 0 && (dim / 4 + t - 1) / t <= kVecMax) {
    e.launch(rms_norm_vec_kernel<false>, static_cast<unsigned>(rows), t, 0, x, dim, w, eps, y,
             round_in, round_out, static_cast<float*>(nullptr));
    e.note(cudaGetLastError());
    return;
  }
  e.launch(rms_norm_kernel, static_cast<unsigned>(rows), kThreads, 0, x, dim, w, eps, y, round_in,
           round_out);
  e.note(cudaGetLastError());
}

void rms_norm_quant_fast(Exec& e, const float* x, int64_t rows, int64_t dim, const float* w,
                         float eps, float* y, bool round_in, bool round_out, float* yq) {
  if (rows <= 0) return;
  if (const int t = vec_threads(x, y, w, dim);
      t > 0 && t * 4 == dim && dim % 128 == 0 && (reinterpret_cast<uintptr_t>(yq) & 15) == 0) {
    e.launch(rms_norm_vec_kernel<true>, static_cast<unsigned>(rows), t, 0, x, dim, w, eps, y,
             round_in, round_out, yq);
    e.note(cudaGetLastError());
    return;
  }
  rms_norm_fast(e, x, rows, dim, w, eps, y, round_in, round_out);
  fp8_quant_rows_from_fast(e, y, dim, rows, dim, 128, yq);
}

int sum_squares_threads(const float* x, int64_t width) {
  const int t = vec_threads(x, x, x, width);
  return t > 0 && (width / 4 + t - 1) / t <= kVecMax ? t : 0;
}

void sum_squares_fast(Exec& e, const float* x, int64_t rows, int64_t width, float* ss) {
  if (rows <= 0) return;
  if (const int t = sum_squares_threads(x, width); t > 0) {
    e.launch(sum_squares_vec_kernel, static_cast<unsigned>(rows), t, 0, x, width, ss);
    e.note(cudaGetLastError());
    return;
  }
  e.launch(sum_squares_kernel, static_cast<unsigned>(rows), kThreads, 0, x, width, ss);
  e.note(cudaGetLastError());
}

void argmax_fast(Exec& e, const float* x, int64_t rows, int64_t V, int32_t* out) {
  if (rows <= 0) return;
  const bool vec4 = V % 4 == 0 && (reinterpret_cast<uintptr_t>(x) & 15) == 0;
  static const bool cluster = env_switch("DEEPINFER_CUDA_ARGMAX_CLUSTER", true);
  if (vec4 && cluster && V >= 4 * kArgSlices * kArgThreads) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(kArgSlices, static_cast<unsigned>(rows));
    cfg.blockDim = dim3(kArgThreads);
    cfg.stream = e.stream;
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = kArgSlices;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    e.note(cudaLaunchKernelEx(&cfg, argmax_cluster_kernel, x, V, out));
    e.note(cudaGetLastError());
    return;
  }
  e.launch(argmax_kernel, static_cast<unsigned>(rows), kArgThreads, 0, x, V, vec4, out);
  e.note(cudaGetLastError());
}

}  // namespace deepinfer::cuda
