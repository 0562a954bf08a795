// Routed experts grouped by expert: the device permutation (moe_plan) and the grouped expert
// GEMV (grouped_experts). What they compute and why is in moe_grouped.cuh.

#include "backend/cuda/cuda_model.h"
#include "backend/cuda/expert_decode.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/gemv_mma.cuh"
#include "backend/cuda/moe.cuh"
#include "backend/cuda/moe_grouped.cuh"
#include "backend/cuda/ops.cuh"

namespace deepinfer::cuda {

void ExpertPlanBuffers::allocate(Exec& e, int64_t max_slots, int E) {
  offsets.allocate(e, static_cast<size_t>(E + 1));
  sorted.allocate(e, static_cast<size_t>(max_slots > 0 ? max_slots : 1));
  chunks.allocate(e, static_cast<size_t>(3 * (expert_max_chunks(max_slots, E) + 1)));
  n_chunks.allocate(e, 1);
}

namespace {

constexpr int kPlanThreads = 1024;

// One block: counts per expert in shared memory, a warp scan for the offsets and the chunk list,
// then warp 0 places the slots 32 at a time in slot order (lanes of one expert ranked by lane), so
// the order within an expert is by slot id whatever the timing.
__global__ void __launch_bounds__(kPlanThreads)
    plan_kernel(const int32_t* __restrict__ idx, int n, int E, ExpertPlan p) {
  pdl_begin();
  extern __shared__ int32_t plan_smem[];
  int32_t* cnt = plan_smem;
  int32_t* cur = plan_smem + E;
  for (int e = threadIdx.x; e < E; e += blockDim.x) cnt[e] = 0;
  __syncthreads();
  for (int s = threadIdx.x; s < n; s += blockDim.x) {
    const int e = idx[s];
    if (e >= 0 && e < E) atomicAdd(&cnt[e], 1);
  }
  __syncthreads();
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  const int per = (E + 31) / 32, e0 = min(E, lane * per), e1 = min(E, e0 + per);
  int slots = 0, chunks = 0;
  for (int e = e0; e < e1; ++e) {
    slots += cnt[e];
    chunks += (cnt[e] + kExpertChunkSlots - 1) / kExpertChunkSlots;
  }
  int inc_s = slots, inc_c = chunks;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const int a = __shfl_up_sync(0xffffffffu, inc_s, off);
    const int b = __shfl_up_sync(0xffffffffu, inc_c, off);
    if (lane >= off) inc_s += a, inc_c += b;
  }
  int run = inc_s - slots, runc = inc_c - chunks;
  for (int e = e0; e < e1; ++e) {
    p.offsets[e] = run;
    cur[e] = run;
    for (int q = 0; q * kExpertChunkSlots < cnt[e]; ++q, ++runc) {
      p.chunks[3 * runc] = e;
      p.chunks[3 * runc + 1] = run + q * kExpertChunkSlots;
      p.chunks[3 * runc + 2] = min(kExpertChunkSlots, cnt[e] - q * kExpertChunkSlots);
    }
    run += cnt[e];
  }
  if (lane == 31) {
    p.offsets[E] = inc_s;
    *p.n_chunks = inc_c;
  }
  __syncwarp();
  for (int base = 0; base < n; base += 32) {
    const int s = base + lane;
    int e = s < n ? idx[s] : -1;
    if (e >= E) e = -1;
    const unsigned same = __match_any_sync(0xffffffffu, e);
    const int rank = __popc(same & ((1u << lane) - 1u));
    if (e >= 0) p.sorted[cur[e] + rank] = s;
    __syncwarp();
    if (e >= 0 && rank == 0) cur[e] += __popc(same);
    __syncwarp();
  }
}

// ---- the grouped GEMV ----

constexpr int kThreads = 256, kWarps = kThreads / 32;

// A lane's chunk of one weight row: 32 consecutive elements (one FP4 scale block; inside one FP8
// scale block), as 16-byte words.
template <DevFormat F>
struct Fmt {
  static constexpr int kWords = F == DevFormat::FP4 ? 1 : F == DevFormat::FP8 ? 2 : 4;
  static constexpr int kCols = F == DevFormat::BF16 ? 2 : 4;  // weight rows per warp
};

template <DevFormat F>
struct Raw {
  uint4 q[Fmt<F>::kWords];
};

template <DevFormat F>
__device__ __forceinline__ Raw<F> load_raw(const DevWeight& w, int64_t o, int64_t k) {
  const int64_t r = o + w.row0;
  Raw<F> v;
  const uint8_t* base = F == DevFormat::FP4   ? w.data + ((r * w.stride + k) >> 1)
                        : F == DevFormat::FP8 ? w.data + r * w.stride + k
                                              : w.data + 2 * (r * w.stride + k);
  const uint4* p = reinterpret_cast<const uint4*>(base);
#pragma unroll
  for (int i = 0; i < Fmt<F>::kWords; ++i) v.q[i] = __ldg(p + i);
  return v;
}

// The chunk's scale; FP4 also undoes the 2^-14 of the fp16 placement in decode8.
template <DevFormat F>
__device__ __forceinline__ float chunk_scale(const DevWeight& w, int64_t o, int64_t k) {
  const int64_t r = o + w.row0;
  if constexpr (F == DevFormat::FP4) return w.scale_at(r, k / w.block_in) * 0x1p14f;
  if constexpr (F == DevFormat::FP8) return w.scale_at(r / w.block_out, k / w.block_in);
  return 1.0f;
}

__device__ __forceinline__ uint32_t word(const uint4& q, int i) {
  return i == 0 ? q.x : i == 1 ? q.y : i == 2 ? q.z : q.w;
}

// Elements 8j … 8j+7 of the chunk, unscaled (FP4 times 2^-14).
template <DevFormat F>
__device__ __forceinline__ void decode8(const Raw<F>& raw, int j, float* v) {
  if constexpr (F == DevFormat::FP4) {
    e2m1x8(word(raw.q[0], j), v);
  } else if constexpr (F == DevFormat::FP8) {
    const uint4& q = raw.q[j / 2];
    e4m3x4(word(q, 2 * (j % 2)), v);
    e4m3x4(word(q, 2 * (j % 2) + 1), v + 4);
  } else {
    const uint4& q = raw.q[j];
#pragma unroll
    for (int i = 0; i < 4; ++i) bf16x2(word(q, i), v + 2 * i);
  }
}

// Shared-memory position of element k of a staged row: each 32-element chunk's float4s are
// XOR-swizzled by the chunk index, so the 8 lanes of a quarter warp (8 consecutive chunks) read
// 8 different bank groups.
__device__ __forceinline__ int swz(int k) { return (k & ~31) | ((k & 31) ^ (((k >> 5) & 7) << 2)); }

using GroupedArgs = ExpertLaunchArgs;

// grid (tiles × products, chunks); each warp Fmt::kCols weight rows of the chunk's expert.
template <DevFormat F, int R>
__global__ void __launch_bounds__(kThreads, R > 1                 ? 1
                                            : F == DevFormat::FP4 ? 3
                                                                  : 2)
    grouped_kernel(GroupedArgs a) {
  pdl_begin();
  constexpr int C = Fmt<F>::kCols;
  extern __shared__ float4 grouped_smem[];
  float* xs = reinterpret_cast<float*>(grouped_smem);
  __shared__ int32_t slot[R];
  const int chunk = blockIdx.y;
  if (chunk >= *a.plan.n_chunks) return;  // the whole block: before any barrier
  const int expert = a.plan.chunks[3 * chunk], first = a.plan.chunks[3 * chunk + 1],
            count = a.plan.chunks[3 * chunk + 2];
  const bool second = static_cast<int>(blockIdx.x) >= a.tiles;
  const ExpertProduct prod = second ? a.b : a.a;
  const DevWeight w = prod.experts[expert];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int tile = static_cast<int>(blockIdx.x) - (second ? a.tiles : 0);
  const int64_t o0 = (static_cast<int64_t>(tile) * kWarps + warp) * C;
  const int in = static_cast<int>(a.in), chunks_in = in / 32;
  for (int s0 = 0; s0 < count; s0 += R) {
    const int nr = min(R, count - s0);
    __syncthreads();  // the last pass is done with xs and slot
    if (threadIdx.x < nr) slot[threadIdx.x] = a.plan.sorted[first + s0 + threadIdx.x];
    __syncthreads();
#pragma unroll 4
    for (int i = threadIdx.x; i < nr * (in / 4); i += kThreads) {
      const int r = i / (in / 4), k = (i % (in / 4)) * 4;
      const int64_t row = a.x_per_slot ? slot[r] : slot[r] / a.K;
      const float4 v = *reinterpret_cast<const float4*>(a.x + row * a.in + k);
      *reinterpret_cast<float4*>(xs + r * in + swz(k)) = v;
    }
    __syncthreads();
    if (o0 >= a.out) continue;
    float acc[R][C];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int c = 0; c < C; ++c) acc[r][c] = 0.0f;
#pragma unroll 2
    for (int ch = lane; ch < chunks_in; ch += 32) {
      const int k = ch * 32;
      Raw<F> raw[C];
      float sc[C];
#pragma unroll
      for (int c = 0; c < C; ++c) {
        if (o0 + c < a.out) {
          raw[c] = load_raw<F>(w, o0 + c, k);
          sc[c] = chunk_scale<F>(w, o0 + c, k);
        } else {
          raw[c] = Raw<F>{};
          sc[c] = 0.0f;
        }
      }
      float part[R][C];
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int c = 0; c < C; ++c) part[r][c] = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float wv[C][8];
#pragma unroll
        for (int c = 0; c < C; ++c) decode8<F>(raw[c], j, wv[c]);
        const int sw = ((8 * j) ^ ((ch & 7) << 2));
#pragma unroll
        for (int r = 0; r < R; ++r) {
          if (r < nr) {
            const float* xr = xs + r * in + k;
            const float4 x0 = *reinterpret_cast<const float4*>(xr + sw);
            const float4 x1 = *reinterpret_cast<const float4*>(xr + (sw ^ 4));
            const float xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
            for (int c = 0; c < C; ++c) {
              float s = part[r][c];
#pragma unroll
              for (int i = 0; i < 8; ++i) s = fmaf(xv[i], wv[c][i], s);
              part[r][c] = s;
            }
          }
        }
      }
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int c = 0; c < C; ++c) acc[r][c] = fmaf(part[r][c], sc[c], acc[r][c]);
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int c = 0; c < C; ++c) {
        float v = acc[r][c];
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (lane == c && r < nr && o0 + c < a.out) {
          prod.y[static_cast<int64_t>(slot[r]) * a.ldy + o0 + c] = a.round_out ? bf16r(v) : v;
        }
      }
    }
  }
}

// Shared memory a pass of R staged rows needs, and the most a block may take.
constexpr int64_t kMaxSmem = 200 * 1024;

template <DevFormat F, int R>
void launch(Exec& e, const GroupedArgs& a, dim3 grid) {
  const size_t smem = static_cast<size_t>(R * a.in * 4);
  static bool raised = false;  // once per instantiation, before any capture needs it
  if (!raised) {
    cudaFuncSetAttribute(grouped_kernel<F, R>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(kMaxSmem));
    raised = true;
  }
  e.launch(grouped_kernel<F, R>, grid, kThreads, smem, a);
  e.note(cudaGetLastError());
}

template <DevFormat F>
void launch_format(Exec& e, const GroupedArgs& a, dim3 grid, int64_t n_slots, int E) {
  // 4 rows per pass once the slots outnumber the experts (several per expert); one otherwise, so
  // a decode pass keeps few registers and many warps in flight. Speed only: a slot's sum is the
  // same in both.
  if (n_slots >= E && 4 * a.in * 4 <= kMaxSmem) {
    launch<F, 4>(e, a, grid);
  } else {
    launch<F, 1>(e, a, grid);
  }
}

}  // namespace

void moe_plan(Exec& e, const int32_t* idx, int64_t n_slots, int E, const ExpertPlan& plan) {
  const size_t smem = static_cast<size_t>(2 * E) * sizeof(int32_t);
  e.launch(plan_kernel, 1, kPlanThreads, smem, idx, static_cast<int>(n_slots), E, plan);
  e.note(cudaGetLastError());
}

bool grouped_experts_supported(int64_t in, DevFormat format) {
  if (!fast_kernels() || in <= 0 || in % 32 != 0 || in * 4 > kMaxSmem) return false;
  return format == DevFormat::FP4 || format == DevFormat::FP8 || format == DevFormat::BF16;
}

void grouped_experts(Exec& e, const ExpertPlan& plan, int64_t n_slots, int E, const float* x,
                     bool x_per_slot, int K, const ExpertProduct& a, const ExpertProduct& b,
                     int64_t ldy, int64_t out, int64_t in, bool official, DevFormat format) {
  if (n_slots <= 0) return;
  GroupedArgs g = expert_launch_args(plan, x, x_per_slot, K, a, b, ldy, out, in, official, format);
  const int cols = kWarps * (format == DevFormat::BF16 ? Fmt<DevFormat::BF16>::kCols
                                                       : Fmt<DevFormat::FP4>::kCols);
  g.tiles = static_cast<int>((out + cols - 1) / cols);
  const dim3 grid(static_cast<unsigned>(g.tiles * (b.experts ? 2 : 1)),
                  static_cast<unsigned>(expert_max_chunks(n_slots, E)));
  switch (format) {
    case DevFormat::FP4:
      launch_format<DevFormat::FP4>(e, g, grid, n_slots, E);
      break;
    case DevFormat::FP8:
      launch_format<DevFormat::FP8>(e, g, grid, n_slots, E);
      break;
    case DevFormat::BF16:
      launch_format<DevFormat::BF16>(e, g, grid, n_slots, E);
      break;
    case DevFormat::F32:
      break;  // not supported (grouped_experts_supported)
  }
}

namespace {
bool g_grouped = env_switch("DEEPINFER_CUDA_GROUPED_EXPERTS", true);
bool g_grouped_tc = env_switch("DEEPINFER_CUDA_GROUPED_TC", true);
}  // namespace

void set_grouped_experts(bool on) { g_grouped = on; }
bool grouped_experts_on() { return g_grouped; }
void set_grouped_tensor_cores(bool on) { g_grouped_tc = on; }
bool grouped_tensor_cores() { return g_grouped_tc; }

bool routed_grouped_supported(const RoutedExperts& r, int64_t d, int64_t inter) {
  return g_grouped && r.f1 == r.f3 && grouped_experts_supported(d, r.f1) &&
         grouped_experts_supported(inter, r.f2);
}

namespace {

// The slots' SwiGLU (into h1) and its FP8 copy for w2 (xq): one launch where swiglu_quant runs.
void swiglu_fp8_copy(Exec& e, float* h1, const float* h3, int64_t slots, int64_t inter, float limit,
                     const float* row_w, bool official, float* xq) {
  if (swiglu_quant(e, h1, h3, slots, inter, limit, official, xq, row_w)) return;
  swiglu(e, h1, h3, slots, inter, limit, row_w, official);
  fp8_quant_rows_from(e, h1, inter, slots, inter, 128, xq);
}

}  // namespace

void routed_grouped(Exec& e, const ExpertPlan& plan, const RoutedExperts& r, const float* x,
                    int64_t n, int E, int K, int64_t d, int64_t inter, float limit,
                    const float* weights, bool official, float* h1, float* h3, float* out,
                    float* xq, const int32_t* idx, const float* xq_ready) {
  const int64_t slots = n * K;
  const bool qx = official && r.quantized;
  // One token: its K slots name distinct experts, so each streams its expert's weights through
  // the tensor-core GEMV itself (no plan), w1 and w3 in one launch.
  const float* x13 = xq_ready ? xq_ready : xq;
  if (n == 1 && qx && !batch_invariant() && r.h1 && r.h2 && r.h3 && r.f1 == r.f3 &&
      r.h1->out == inter && r.h3->out == inter && r.h1->in == d && r.h3->in == d &&
      r.h2->out == d && r.h2->in == inter && experts_mma_supported(*r.h1, x13, d) &&
      experts_mma_supported(*r.h3, x13, d) && experts_mma_supported(*r.h2, xq, inter)) {
    if (!xq_ready) fp8_quant_rows_from(e, x, d, n, d, 128, xq);
    ExpertMmaProducts w13{{r.r1, r.r3}, {h1, h3}, 2, r.f1, inter, d};
    w13.scales16 = experts_bulk_supported(*r.h1) && experts_bulk_supported(*r.h3);
    experts_mma(e, w13, idx, K, K, x13, d, false, inter);
    const float* row_w = official ? weights : nullptr;
    ExpertMmaProducts w2{{r.r2, nullptr}, {out, nullptr}, 1, r.f2, d, inter};
    w2.scales16 = experts_bulk_supported(*r.h2);
    if (experts_swiglu_fold() && experts_mma_supported(*r.h2, h1, inter)) {
      w2.swiglu_h3 = h3, w2.swiglu_row_w = row_w, w2.swiglu_limit = limit;
      w2.swiglu_official = official;
      experts_mma(e, w2, idx, K, K, h1, inter, true, d);
      return;
    }
    swiglu_fp8_copy(e, h1, h3, slots, inter, limit, row_w, official, xq);
    experts_mma(e, w2, idx, K, K, xq, inter, true, d);
    return;
  }
  moe_plan(e, idx, slots, E, plan);
  // Quantized experts take FP8-quantized inputs (per 1×128) in the official numerics, once for
  // w1 and w3 together (or as the caller has them already: xq_ready).
  if (qx) {
    if (!xq_ready) fp8_quant_rows_from(e, x, d, n, d, 128, xq);
    x = xq_ready ? xq_ready : xq;
  }
  const bool tc = g_grouped_tc && qx && slots >= int64_t{kTcMinSlotsPerExpert} * E &&
                  grouped_experts_tc_supported(d, r.f1) &&
                  grouped_experts_tc_supported(inter, r.f2);
  // Decode-sized launches of the same numerics on the mma kernel for few slots per expert
  // (batch-invariant mode keeps the CUDA-core kernel, whose bits it was checked with).
  const bool dec = !tc && experts_decode_tc() && !batch_invariant() && qx &&
                   slots >= experts_decode_tc_min_slots(E, r.f1) &&
                   grouped_experts_dec_supported(d, r.f1) &&
                   grouped_experts_dec_supported(inter, r.f2);
  const auto product = tc ? grouped_experts_tc : dec ? grouped_experts_dec : grouped_experts;
  // Prefill-sized launches (any numerics) on cuBLAS where it runs them and beats the kernel above.
  std::vector<int32_t> offsets;
  const bool lt = slots >= int64_t{kTcMinSlotsPerExpert} * E &&
                  grouped_experts_lt_supported(d, r.f1) &&
                  grouped_experts_lt_supported(inter, r.f2) &&
                  read_plan_offsets(e, plan, E, offsets) && experts_lt_pays(offsets, E, tc);
  // Official numerics give the w2 product bf16-exact inputs (the SwiGLU rounds, or FP8 codes).
  const auto run = [&](const float* in_x, bool per_slot, const ExpertProduct& pa,
                       const ExpertProduct& pb, int64_t ld, int64_t o, int64_t i, DevFormat f) {
    const bool exact_in = qx || (official && per_slot);
    if (lt && grouped_experts_lt(e, plan, offsets, slots, E, in_x, per_slot, K, pa, pb, ld, o, i,
                                 official, f, exact_in))
      return;
    product(e, plan, slots, E, in_x, per_slot, K, pa, pb, ld, o, i, official, f);
  };
  run(x, false, {r.r1, h1}, {r.r3, h3}, inter, inter, d, r.f1);
  const float* row_w = official ? weights : nullptr;
  const float* h = h1;
  if (qx) {
    swiglu_fp8_copy(e, h1, h3, slots, inter, limit, row_w, official, xq);
    h = xq;
  } else {
    swiglu(e, h1, h3, slots, inter, limit, row_w, official);
  }
  run(h, true, {r.r2, out}, {}, d, d, inter, r.f2);
}

}  // namespace deepinfer::cuda
