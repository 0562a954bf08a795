// The cuBLAS path of the grouped expert products (moe_grouped.cuh grouped_experts_lt): the slots'
// activation rows gathered in expert order as bf16 (hi, and lo = the rounding rest unless they are
// bf16-exact), the experts with slots dequantized to bf16 a chunk at a time into one bounded
// buffer (the two products that share their input stacked as one [2·out, in] matrix),
// a cuBLAS batched GEMM per bucket of experts with equal padded rows (bf16 × bf16 → fp32), and the
// fp32 results scattered back to the slots' rows. Every expert's rows start at a multiple of
// kRowAlign and its bucket computes the whole padded region, so no expert touches another's rows.
// Dequantizing the next chunk on a second stream beside the current chunk's GEMMs measured the
// same as one stream (within 1 % on the H200: cuBLAS's kernels hold the SMs), so all runs in order
// on the caller's stream.
// cublasGemmGroupedBatchedEx (a group per expert) answered "not supported" for bf16 inputs with
// fp32 outputs on the H200 (cuBLAS 13), so buckets of batched calls it is.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <map>
#include <vector>

#include "backend/cuda/expert_decode.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/moe_grouped.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int64_t kRowAlign = 32;                         // rows per padded bucket step
constexpr size_t kWeightBufferBytes = size_t{512} << 20;  // the chunk buffer

bool g_on = env_switch("DEEPINFER_CUDA_EXPERTS_LT", true);

// A growing device buffer (old contents dropped).
struct Scratch {
  void* p = nullptr;
  size_t bytes = 0;
  bool reserve(size_t need) {
    if (need <= bytes) return true;
    cudaFree(p);
    p = nullptr;
    bytes = 0;
    if (cudaMalloc(&p, need) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    bytes = need;
    return true;
  }
};

// One per device: the handle and the scratch, shared by the streams that use it in turn (each
// call waits for the last one's work on its stream before it reuses the scratch).
struct LtState {
  cublasHandle_t handle = nullptr;
  cudaEvent_t done = nullptr;
  Scratch xhi, xlo, c, w, ints, ptrs;
};

LtState* state_for_device() {
  static std::map<int, LtState> states;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return nullptr;
  LtState& s = states[dev];
  if (!s.handle) {
    if (cublasCreate(&s.handle) != CUBLAS_STATUS_SUCCESS) {
      s.handle = nullptr;
      return nullptr;
    }
    cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming);
  }
  return &s;
}

// Sorted index j → its expert: the last e with offsets[e] ≤ j (experts with slots only).
__device__ __forceinline__ int expert_of(const int32_t* offsets, int E, int j) {
  int lo = 0, hi = E;  // offsets[lo] ≤ j < offsets[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (offsets[mid] <= j)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

__device__ __forceinline__ uint32_t bits(__nv_bfloat162 h) {
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Block j: sorted slot j's activation row (x row slot or slot / K) → padded row
// j + base[expert], as bf16 hi (and lo = the rest, rounded).
__global__ void gather_kernel(ExpertPlan plan, int E, const int32_t* base, const float* x,
                              bool x_per_slot, int K, int64_t in, __nv_bfloat16* hi,
                              __nv_bfloat16* lo) {
  const int j = blockIdx.x;
  const int e = expert_of(plan.offsets, E, j);
  const int s = plan.sorted[j];
  const float* src = x + (x_per_slot ? s : s / K) * in;
  const int64_t row = j + base[e];
  for (int64_t k = 4 * threadIdx.x; k < in; k += 4 * blockDim.x) {
    const float4 v = *reinterpret_cast<const float4*>(src + k);
    const __nv_bfloat162 h01 = __floats2bfloat162_rn(v.x, v.y),
                         h23 = __floats2bfloat162_rn(v.z, v.w);
    *reinterpret_cast<uint2*>(hi + row * in + k) = make_uint2(bits(h01), bits(h23));
    if (lo) {
      const float2 f01 = __bfloat1622float2(h01), f23 = __bfloat1622float2(h23);
      *reinterpret_cast<uint2*>(lo + row * in + k) =
          make_uint2(bits(__floats2bfloat162_rn(v.x - f01.x, v.y - f01.y)),
                     bits(__floats2bfloat162_rn(v.z - f23.x, v.w - f23.y)));
    }
  }
}

// 8 weights (o, k … k+7) of w with their block scale as bf16 (exact: a code times a power of
// two), packed for one 16-byte store.
template <DevFormat F>
__device__ __forceinline__ uint4 weights8_bf16(const DevWeight& w, int64_t o, int64_t k) {
  const int64_t r = o + w.row0;
  if constexpr (F == DevFormat::BF16) {
    return __ldg(reinterpret_cast<const uint4*>(w.data + 2 * (r * w.stride + k)));
  } else {
    float v[8];
    float sc;
    if constexpr (F == DevFormat::FP4) {
      e2m1x8(__ldg(reinterpret_cast<const uint32_t*>(w.data + ((r * w.stride + k) >> 1))), v);
      sc = w.scale_at(r, k / w.block_in) * 0x1p14f;
    } else {
      const uint2 q = __ldg(reinterpret_cast<const uint2*>(w.data + r * w.stride + k));
      e4m3x4(q.x, v);
      e4m3x4(q.y, v + 4);
      sc = w.scale_at(r / w.block_out, k / w.block_in);
    }
    uint32_t u[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      u[i] = bits(__floats2bfloat162_rn(v[2 * i] * sc, v[2 * i + 1] * sc));
    }
    return make_uint4(u[0], u[1], u[2], u[3]);
  }
}

// grid (8-element groups / 256, chunk experts): expert experts[y]'s matrix a (rows [0, out))
// and b (rows [out, 2·out)) → dst + y · rows · in, bf16, one coalesced 16-byte store a thread.
template <DevFormat F>
__global__ void dequant_kernel(const int32_t* experts, const DevWeight* a, const DevWeight* b,
                               int64_t out, int64_t in, __nv_bfloat16* dst) {
  const int64_t rows = b ? 2 * out : out;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t per_row = in / 8;
  if (g >= rows * per_row) return;
  const int64_t r = g / per_row, k = (g % per_row) * 8;
  const int ex = experts[blockIdx.y];
  const DevWeight& w = r < out ? a[ex] : b[ex];
  *reinterpret_cast<uint4*>(dst + (static_cast<int64_t>(blockIdx.y) * rows + r) * in + k) =
      weights8_bf16<F>(w, r < out ? r : r - out, k);
}

// Block j: padded row j + base[expert] of c [rows, ldc] → slot row of a.y (columns [0, out))
// and of b.y (columns [out, 2·out)).
__global__ void scatter_kernel(ExpertPlan plan, int E, const int32_t* base, const float* c,
                               int64_t ldc, float* ya, float* yb, int64_t ldy, int64_t out,
                               bool round_out) {
  const int j = blockIdx.x;
  const int e = expert_of(plan.offsets, E, j);
  const int64_t s = plan.sorted[j];
  const float* src = c + (j + base[e]) * ldc;
  for (int64_t o = threadIdx.x; o < ldc; o += blockDim.x) {
    const float v = src[o];
    float* y = o < out ? ya + s * ldy + o : yb + s * ldy + (o - out);
    *y = round_out ? bf16r(v) : v;
  }
}

int64_t align_rows(int64_t n) { return (n + kRowAlign - 1) / kRowAlign * kRowAlign; }

}  // namespace

void set_experts_lt(bool on) { g_on = on; }
bool experts_lt() { return g_on; }

bool experts_lt_pays(const std::vector<int32_t>& offsets, int E, bool against_wmma) {
  if (!against_wmma) return true;
  int active = 0;
  for (int x_e = 0; x_e < E; ++x_e) active += offsets[x_e + 1] > offsets[x_e] ? 1 : 0;
  return offsets[E] >= int64_t{kLtMinRowsPerExpert} * active;
}

bool grouped_experts_lt_supported(int64_t in, DevFormat format) {
  return g_on && fast_kernels() && in > 0 && in % 8 == 0 &&
         (format == DevFormat::FP4 || format == DevFormat::FP8 || format == DevFormat::BF16);
}

bool read_plan_offsets(Exec& e, const ExpertPlan& plan, int E, std::vector<int32_t>& offsets) {
  if (e.emulate) return false;
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(e.stream, &st) != cudaSuccess || st != cudaStreamCaptureStatusNone)
    return false;
  offsets.resize(static_cast<size_t>(E + 1));
  if (cudaMemcpyAsync(offsets.data(), plan.offsets, offsets.size() * 4, cudaMemcpyDeviceToHost,
                      e.stream) != cudaSuccess)
    return false;
  return cudaStreamSynchronize(e.stream) == cudaSuccess;
}

bool grouped_experts_lt(Exec& e, const ExpertPlan& plan, const std::vector<int32_t>& offsets,
                        int64_t n_slots, int E, const float* x, bool x_per_slot, int K,
                        const ExpertProduct& a, const ExpertProduct& b, int64_t ldy, int64_t out,
                        int64_t in, bool official, DevFormat format, bool x_bf16) {
  if (n_slots <= 0) return true;
  if (static_cast<int64_t>(offsets.size()) != E + 1 || offsets[E] != n_slots) return false;
  LtState* s = state_for_device();
  if (!s) return false;
  cudaStreamWaitEvent(e.stream, s->done, 0);  // the scratch's last user is done
  const int64_t M = b.experts ? 2 * out : out;
  // Experts with slots, by padded row count (a bucket each), then by id.
  std::vector<int> active;
  for (int x_e = 0; x_e < E; ++x_e)
    if (offsets[x_e + 1] > offsets[x_e]) active.push_back(x_e);
  const auto count = [&](int x_e) { return int64_t{offsets[x_e + 1] - offsets[x_e]}; };
  std::stable_sort(active.begin(), active.end(),
                   [&](int p, int q) { return align_rows(count(p)) < align_rows(count(q)); });
  std::vector<int32_t> ints(static_cast<size_t>(E) + active.size(), 0);  // base[E] | active
  int64_t rows = 0;
  for (size_t i = 0; i < active.size(); ++i) {
    const int x_e = active[i];
    ints[static_cast<size_t>(x_e)] = static_cast<int32_t>(rows - offsets[x_e]);
    ints[static_cast<size_t>(E) + i] = x_e;
    rows += align_rows(count(x_e));
  }
  const size_t w_bytes = static_cast<size_t>(M * in) * 2;
  const int64_t n_active = static_cast<int64_t>(active.size());
  const int64_t chunk =
      std::min(n_active, std::max<int64_t>(1, static_cast<int64_t>(kWeightBufferBytes / w_bytes)));
  const size_t n_ptrs = 4 * active.size();
  const int64_t n_chunks = (n_active + chunk - 1) / chunk;
  if (!s->xhi.reserve(static_cast<size_t>(rows * in) * 2) ||
      (!x_bf16 && !s->xlo.reserve(static_cast<size_t>(rows * in) * 2)) ||
      !s->c.reserve(static_cast<size_t>(rows * M) * 4) ||
      !s->w.reserve(static_cast<size_t>(chunk) * w_bytes) || !s->ints.reserve(ints.size() * 4) ||
      !s->ptrs.reserve(n_ptrs * sizeof(void*)))
    return false;
  auto* xhi = static_cast<__nv_bfloat16*>(s->xhi.p);
  auto* xlo = x_bf16 ? nullptr : static_cast<__nv_bfloat16*>(s->xlo.p);
  auto* c = static_cast<float*>(s->c.p);
  auto* w = static_cast<__nv_bfloat16*>(s->w.p);
  auto* d_ints = static_cast<int32_t*>(s->ints.p);
  // Pointer arrays per active expert (in `active` order): A = its dequantized weights in the
  // chunk buffer, B = its hi (lo) rows, C = its output rows.
  std::vector<void*> ptrs(n_ptrs);
  for (int64_t i = 0; i < n_active; ++i) {
    const int x_e = active[static_cast<size_t>(i)];
    const int64_t r0 = ints[static_cast<size_t>(x_e)] + offsets[x_e];
    ptrs[static_cast<size_t>(i)] = w + (i % chunk) * M * in;
    ptrs[static_cast<size_t>(n_active + i)] = xhi + r0 * in;
    ptrs[static_cast<size_t>(2 * n_active + i)] = xlo ? xlo + r0 * in : nullptr;
    ptrs[static_cast<size_t>(3 * n_active + i)] = c + r0 * M;
  }
  // Pageable sources: the copies have read them when these calls return.
  e.note(cudaMemcpyAsync(d_ints, ints.data(), ints.size() * 4, cudaMemcpyHostToDevice, e.stream));
  auto** d_ptrs = static_cast<void**>(s->ptrs.p);
  e.note(cudaMemcpyAsync(d_ptrs, ptrs.data(), n_ptrs * sizeof(void*), cudaMemcpyHostToDevice,
                         e.stream));
  gather_kernel<<<static_cast<unsigned>(n_slots), 256, 0, e.stream>>>(plan, E, d_ints, x,
                                                                      x_per_slot, K, in, xhi, xlo);
  e.note(cudaGetLastError());
  cublasSetStream(s->handle, e.stream);
  bool ok = true;
  for (int64_t q = 0; q < n_chunks && ok; ++q) {
    const int64_t c0 = q * chunk, nc = std::min(chunk, n_active - c0);
    // The buffer is reused in stream order: chunk q's dequantization follows chunk q − 1's GEMMs.
    const dim3 grid(static_cast<unsigned>((M * (in / 8) + 255) / 256), static_cast<unsigned>(nc));
    const int32_t* ex = d_ints + E + c0;
    switch (format) {
      case DevFormat::FP4:
        dequant_kernel<DevFormat::FP4>
            <<<grid, 256, 0, e.stream>>>(ex, a.experts, b.experts, out, in, w);
        break;
      case DevFormat::FP8:
        dequant_kernel<DevFormat::FP8>
            <<<grid, 256, 0, e.stream>>>(ex, a.experts, b.experts, out, in, w);
        break;
      default:
        dequant_kernel<DevFormat::BF16>
            <<<grid, 256, 0, e.stream>>>(ex, a.experts, b.experts, out, in, w);
        break;
    }
    e.note(cudaGetLastError());
    // A batched call per bucket (experts of equal padded rows: consecutive in `active`).
    std::vector<int> bn, bsize;
    for (int64_t i = c0; i < c0 + nc; ++i) {
      const int padded = static_cast<int>(align_rows(count(active[static_cast<size_t>(i)])));
      if (!bn.empty() && bn.back() == padded) {
        ++bsize.back();
      } else {
        bn.push_back(padded);
        bsize.push_back(1);
      }
    }
    for (int half = 0; half < (xlo ? 2 : 1) && ok; ++half) {
      void* const* A = d_ptrs + c0;
      void* const* B = d_ptrs + (half ? 2 : 1) * n_active + c0;
      void* const* C = d_ptrs + 3 * n_active + c0;
      const float alpha = 1.0f, beta = half ? 1.0f : 0.0f;
      for (size_t g = 0, at = 0; g < bn.size() && ok; at += static_cast<size_t>(bsize[g]), ++g) {
        ok = cublasGemmBatchedEx(s->handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(M), bn[g],
                                 static_cast<int>(in), &alpha, A + at, CUDA_R_16BF,
                                 static_cast<int>(in), B + at, CUDA_R_16BF, static_cast<int>(in),
                                 &beta, C + at, CUDA_R_32F, static_cast<int>(M), bsize[g],
                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
      }
    }
  }
  if (!ok) {
    cudaEventRecord(s->done, e.stream);
    return false;
  }
  const bool round_out = official && format != DevFormat::BF16;
  scatter_kernel<<<static_cast<unsigned>(n_slots), 256, 0, e.stream>>>(
      plan, E, d_ints, c, M, a.y, b.experts ? b.y : nullptr, ldy, out, round_out);
  e.note(cudaGetLastError());
  cudaEventRecord(s->done, e.stream);
  return true;
}

}  // namespace deepinfer::cuda
