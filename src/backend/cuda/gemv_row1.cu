#include <algorithm>
#include <cstdlib>
#include <type_traits>

#include "backend/cuda/cuda_model.h"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/gemv_row1.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32, kCols = 4;
// Fewer warps than this (a block per SM or so) and the split-row kernel's block per column
// keeps more of the GPU busy.
constexpr int64_t kMinWarps = 1024;

struct Row1Job {
  DevWeight w;
  const float* x;
  float* y;
  int split_shift;  // log2 of the warps per column group; -1: the split-row body
  int in_shift;     // log2(block_in) (FP8 / FP4)
  int out_shift;    // log2(block_out) (FP8)
  bool round_out;
};

struct Row1Launch {
  Row1Job job[kMaxGemvJobs];
  int first[kMaxGemvJobs + 1];  // job j's first block
  int count;
};

// Elements per 16-byte chunk.
template <DevFormat F>
constexpr int kElems = F == DevFormat::BF16  ? 8
                       : F == DevFormat::FP8 ? 16
                                             : 32;

// A chunk's E inputs into registers (read once for the four columns).
template <DevFormat F>
__device__ __forceinline__ void load_x(const float4* __restrict__ xp, float* xv) {
#pragma unroll
  for (int t = 0; t < kElems<F> / 4; ++t) {
    const float4 a = xp[t];
    xv[4 * t] = a.x, xv[4 * t + 1] = a.y, xv[4 * t + 2] = a.z, xv[4 * t + 3] = a.w;
  }
}

// Σ x[e] · weight[e] over a 16-byte chunk's E elements in element order, a 32-bit word at a time
// so few weights are live at once. (FP8 by bit placement instead of the e4m3 conversions measured
// slower on the H200: 0.0210 vs 0.0194 ms for wq_b.)
template <DevFormat F>
__device__ __forceinline__ float chunk_dot(const uint4& q, const float* xv) {
  const uint32_t u[4] = {q.x, q.y, q.z, q.w};
  float p = 0.0f;
#pragma unroll
  for (int wd = 0; wd < 4; ++wd) {
    const uint32_t v = u[wd];
    if constexpr (F == DevFormat::BF16) {
      p += xv[2 * wd] * __uint_as_float(v << 16);
      p += xv[2 * wd + 1] * __uint_as_float(v & 0xffff0000u);
    } else if constexpr (F == DevFormat::FP8) {
      const float* x = xv + 4 * wd;
      const __half2 lo = __half2(
          __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v & 0xffffu), __NV_E4M3));
      const __half2 hi = __half2(
          __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(v >> 16), __NV_E4M3));
      p += x[0] * __low2float(lo);
      p += x[1] * __high2float(lo);
      p += x[2] * __low2float(hi);
      p += x[3] * __high2float(hi);
    } else {
      // e2m1 at float bits 31 and 24..22 is the value times 2^-126 (decode() in gemv_device.cuh).
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        const uint32_t nib = v >> (4 * t);
        p += xv[8 * wd + t] * (__uint_as_float(((nib & 7u) << 22) | ((nib & 8u) << 28)) * 0x1p126f);
      }
    }
  }
  return p;
}

__device__ __forceinline__ float scale_value(const DevWeight& w, int64_t i) {
  if (w.scale_f32) return __ldg(reinterpret_cast<const float*>(w.scale) + i);
  return ue8m0_to_float(__ldg(w.scale + i));
}

// A block of a job holds kWarps / S column groups of four, S warps each; warp (g, s) of it.
struct Row1Warp {
  int lane, warp, g, s, S, groups_per_block;
  int64_t o0;  // the group's first column
  __device__ Row1Warp(const Row1Job& jb, int64_t block)
      : lane(threadIdx.x & 31),
        warp(threadIdx.x >> 5),
        g(warp >> jb.split_shift),
        s(warp & ((1 << jb.split_shift) - 1)),
        S(1 << jb.split_shift),
        groups_per_block(kWarps >> jb.split_shift),
        o0((block * groups_per_block + g) * kCols) {}
};

// The group's four weight rows (16-byte chunks) and their scale-row offsets.
template <DevFormat F>
__device__ __forceinline__ void group_rows(const Row1Job& jb, int64_t o0, const uint4** rowp,
                                           int64_t* srow) {
  const DevWeight& w = jb.w;
  const int64_t row_bytes = F == DevFormat::BF16  ? w.stride * 2
                            : F == DevFormat::FP8 ? w.stride
                                                  : w.stride / 2;
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    // Past the last column: a valid row read and its sum never written.
    const int64_t r = (o0 + c < w.out ? o0 + c : w.out - 1) + w.row0;
    rowp[c] = reinterpret_cast<const uint4*>(w.data + r * row_bytes);
    srow[c] = (F == DevFormat::FP8 ? (r >> jb.out_shift) : r) * w.scale_stride;
  }
}

template <DevFormat F>
__device__ __forceinline__ float chunk_scale(const Row1Job& jb, int64_t srow, int64_t i) {
  if constexpr (F == DevFormat::BF16) return 1.0f;
  return scale_value(jb.w, srow + ((i * kElems<F>) >> jb.in_shift));
}

// The lanes' sums by shuffles, then the S warps' sums of each column in slice order.
__device__ __forceinline__ void row1_finish(const Row1Job& jb, const Row1Warp& t, int64_t block,
                                            float* acc) {
  __shared__ float part[kWarps][kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc[c] += __shfl_xor_sync(0xffffffffu, acc[c], off);
  }
  if (t.lane == 0) {
#pragma unroll
    for (int c = 0; c < kCols; ++c) part[t.warp][c] = acc[c];
  }
  __syncthreads();
  if (static_cast<int>(threadIdx.x) < t.groups_per_block * kCols) {
    const int gi = threadIdx.x / kCols, c = threadIdx.x % kCols;
    const int64_t o = (block * t.groups_per_block + gi) * kCols + c;
    float v = 0.0f;
    for (int i = 0; i < t.S; ++i) v += part[gi * t.S + i][c];
    if (o < jb.w.out) jb.y[o] = jb.round_out ? bf16r(v) : v;
  }
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Bytes of a block's ring of NB stages (kWarps × NB × kCols × 32 lanes × 16 bytes).
constexpr size_t ring_bytes(int nb) { return size_t{kWarps} * nb * kCols * 32 * 16; }
// Blocks per SM the shared memory allows (3 stages: 4, 4 stages: 3); the mixed-format kernel's
// registers at 2.
constexpr int min_blocks(int nb, int fmt) { return fmt < 0 ? 2 : nb == 3 ? 4 : 3; }

// A lane's sum over its chunks first, first + step, … (in order) per column, times each chunk's
// block scale, the chunks streamed by asynchronous copies through a ring of NB stages in shared
// memory — one chunk per column a stage, its own slots, so no
// barrier — keeping NB - 1 stages in flight while it multiplies the oldest, without holding
// them in registers.
template <DevFormat F, int NB>
__device__ __forceinline__ void row1_block(const Row1Job& jb, int64_t block) {
  constexpr int E = kElems<F>;
  extern __shared__ uint4 ring_mem[];
  const Row1Warp t(jb, block);
  const DevWeight& w = jb.w;
  float acc[kCols] = {};
  if (t.o0 < w.out) {
    uint4* ring = ring_mem + static_cast<size_t>(t.warp) * NB * kCols * 32 + t.lane;
    const uint4* rowp[kCols];
    int64_t srow[kCols];
    group_rows<F>(jb, t.o0, rowp, srow);
    const int chunks = static_cast<int>(w.in / E), step = 32 * t.S, first = t.s * 32 + t.lane;
    const int mine = first < chunks ? (chunks - first + step - 1) / step : 0;
    const float4* xv4 = reinterpret_cast<const float4*>(jb.x);
    // Stage n (the lane's n-th chunk) into slot `slot`; one commit group each, empty past the end.
    auto issue = [&](int n, int slot) {
      if (n < mine) {
        const int i = first + n * step;
#pragma unroll
        for (int c = 0; c < kCols; ++c) cp_async16(ring + (slot * kCols + c) * 32, rowp[c] + i);
      }
      cp_async_commit();
    };
#pragma unroll
    for (int b = 0; b < NB - 1; ++b) issue(b, b);
    for (int n0 = 0; n0 < mine; n0 += NB) {
#pragma unroll
      for (int b = 0; b < NB; ++b) {
        issue(n0 + b + NB - 1, (b + NB - 1) % NB);
        const int n = n0 + b;
        // The block scales (small, cached) load while the stage lands.
        float sc[kCols];
        const int i = first + n * step;
#pragma unroll
        for (int c = 0; c < kCols; ++c) sc[c] = n < mine ? chunk_scale<F>(jb, srow[c], i) : 0.0f;
        cp_async_wait<NB - 1>();
        if (n < mine) {
          float xv[E];
          load_x<F>(xv4 + int64_t{i} * (E / 4), xv);
#pragma unroll
          for (int c = 0; c < kCols; ++c) {
            const float p = chunk_dot<F>(ring[(b * kCols + c) * 32], xv);
            acc[c] += F == DevFormat::BF16 ? p : p * sc[c];
          }
        }
      }
    }
    cp_async_wait<0>();
  }
  row1_finish(jb, t, block, acc);
}

// Fmt: the one format of every row1 job of the launch (fewer registers), or -1: each job's own.
template <int NB, int Fmt>
__global__ void __launch_bounds__(kThreads, min_blocks(NB, Fmt))
    gemv_row1_kernel(const __grid_constant__ Row1Launch L) {
  pdl_begin();
  int j = 0;
  while (j + 1 < L.count && static_cast<int>(blockIdx.x) >= L.first[j + 1]) ++j;
  const Row1Job& jb = L.job[j];
  const int64_t b = static_cast<int64_t>(blockIdx.x) - L.first[j];
  if (jb.split_shift < 0) {
    splitk_column<1>(jb.x, 0, 1, jb.w, b, jb.y, 0, jb.round_out);
    return;
  }
  const DevFormat f = Fmt >= 0 ? static_cast<DevFormat>(Fmt) : jb.w.format;
  auto run = [&](auto format) {
    constexpr DevFormat F = decltype(format)::value;
    if constexpr (Fmt < 0 || Fmt == static_cast<int>(F)) row1_block<F, NB>(jb, b);
  };
  if (f == DevFormat::FP8) {
    run(std::integral_constant<DevFormat, DevFormat::FP8>{});
  } else if (f == DevFormat::FP4) {
    run(std::integral_constant<DevFormat, DevFormat::FP4>{});
  } else if (f == DevFormat::BF16) {
    run(std::integral_constant<DevFormat, DevFormat::BF16>{});
  }
}

bool g_row1 = env_switch("DEEPINFER_CUDA_GEMV_ROW1", true);
int g_row1_warps = [] {
  const char* v = std::getenv("DEEPINFER_CUDA_GEMV_ROW1_WARPS");
  return v ? std::max(1, std::atoi(v)) : 132 * 32;
}();
// Stages of the ring: 3 (default) or 4.
int g_row1_stages = [] {
  const char* v = std::getenv("DEEPINFER_CUDA_GEMV_ROW1_STAGES");
  return v && std::atoi(v) == 4 ? 4 : 3;
}();

int log2_exact(int64_t v) {
  if (v <= 0 || (v & (v - 1)) != 0) return -1;
  int s = 0;
  while ((int64_t{1} << s) < v) ++s;
  return s;
}

int64_t elems_per_chunk(DevFormat f) {
  return f == DevFormat::BF16 ? 8 : f == DevFormat::FP8 ? 16 : f == DevFormat::FP4 ? 32 : 0;
}

Row1Job make_job(const DevWeight& w, const float* x, float* y, bool round_out, int split) {
  Row1Job j{};
  j.w = w;
  j.x = x;
  j.y = y;
  j.round_out = round_out;
  j.split_shift = split > 0 ? log2_exact(split) : -1;
  j.in_shift = w.quantized() ? log2_exact(w.block_in) : 0;
  j.out_shift = w.format == DevFormat::FP8 ? log2_exact(w.block_out) : 0;
  return j;
}

int64_t job_blocks(const Row1Job& j) {
  if (j.split_shift < 0) return j.w.out;
  const int64_t groups = (j.w.out + kCols - 1) / kCols, per_block = kWarps >> j.split_shift;
  return (groups + per_block - 1) / per_block;
}

template <int NB, int Fmt>
void launch_stages(Exec& e, const Row1Launch& L, unsigned blocks) {
  const auto kernel = gemv_row1_kernel<NB, Fmt>;
  const size_t shared = ring_bytes(NB);
  // Past the default 48 KB of shared memory a block; once per kernel (allowed in a capture).
  static const cudaError_t set = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
  e.note(set);
  e.launch(kernel, blocks, kThreads, shared, L);
}

template <int NB>
void launch_format(Exec& e, const Row1Launch& L, unsigned blocks, int fmt) {
  constexpr int kFp8 = static_cast<int>(DevFormat::FP8), kFp4 = static_cast<int>(DevFormat::FP4),
                kBf16 = static_cast<int>(DevFormat::BF16);
  switch (fmt) {
    case kFp8:
      launch_stages<NB, kFp8>(e, L, blocks);
      break;
    case kFp4:
      launch_stages<NB, kFp4>(e, L, blocks);
      break;
    case kBf16:
      launch_stages<NB, kBf16>(e, L, blocks);
      break;
    default:
      launch_stages<NB, -1>(e, L, blocks);
  }
}

void launch(Exec& e, Row1Launch& L) {
  int blocks = 0, fmt = -2;
  for (int j = 0; j < L.count; ++j) {
    L.first[j] = blocks;
    blocks += static_cast<int>(job_blocks(L.job[j]));
    if (L.job[j].split_shift >= 0) {
      const int f = static_cast<int>(L.job[j].w.format);
      fmt = fmt == -2 || fmt == f ? f : -1;
    }
  }
  L.first[L.count] = blocks;
  if (blocks == 0) return;
  if (fmt == -2) fmt = -1;  // only split-row jobs
  const unsigned b = static_cast<unsigned>(blocks);
  if (g_row1_stages == 4) {
    launch_format<4>(e, L, b, fmt);
  } else {
    launch_format<3>(e, L, b, fmt);
  }
}

}  // namespace

bool gemv_row1_on() { return g_row1; }
void set_gemv_row1(bool on) { g_row1 = on; }
void set_gemv_row1_tuning(int warps, int stages) {
  g_row1_warps = std::max(1, warps);
  g_row1_stages = stages == 4 ? 4 : 3;
}
int gemv_row1_warps() { return g_row1_warps; }
int gemv_row1_stages() { return g_row1_stages; }

int gemv_row1_split(const DevWeight& w, const float* x) {
  if (!g_row1 || !fast_kernels() || batch_invariant() || gemv_version() != 0) return 0;
  // FP8 / FP4 only where gemv() would take the split-row kernel: elsewhere the row kernels of
  // gemv.cu measured faster (H200, HBM-cold: wq_b 0.0182 vs 0.0194 ms, wo_b 0.0166 vs 0.0199).
  if (w.quantized() && !gemv_split_row(w, 1, x, 4)) return 0;
  const int64_t E = elems_per_chunk(w.format);
  if (E == 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(w.data) % 16 != 0 || w.in % E != 0 || w.in < E)
    return 0;
  const int64_t row_bytes = w.format == DevFormat::BF16  ? w.stride * 2
                            : w.format == DevFormat::FP8 ? w.stride
                                                         : w.stride / 2;
  if (row_bytes % 16 != 0 || (w.format == DevFormat::FP4 && w.stride % 2 != 0)) return 0;
  if (w.quantized() && (log2_exact(w.block_in) < 0 || w.block_in % E != 0)) return 0;
  if (w.format == DevFormat::FP8 && log2_exact(w.block_out) < 0) return 0;
  const int64_t groups = (w.out + kCols - 1) / kCols, steps = w.in / (32 * E);
  int s = 1;
  while (s < kWarps && groups * s < g_row1_warps && steps >= 2 * s) s *= 2;
  return groups * s >= kMinWarps ? s : 0;
}

void gemv_row1(Exec& e, const float* x, const DevWeight& w, int split, float* y, bool round_out) {
  Row1Launch L{};
  L.count = 1;
  L.job[0] = make_job(w, x, y, round_out, split);
  launch(e, L);
}

void gemv_row1_group(Exec& e, const float* x, const GemvJob* jobs, int count) {
  Row1Launch L{};
  L.count = count;
  for (int j = 0; j < count; ++j) {
    const float* xj = jobs[j].x ? jobs[j].x : x;
    L.job[j] =
        make_job(*jobs[j].w, xj, jobs[j].y, jobs[j].round_out, gemv_row1_split(*jobs[j].w, xj));
  }
  launch(e, L);
}

}  // namespace deepinfer::cuda
