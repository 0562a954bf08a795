// The decode-sized tensor-core grouped expert kernel (moe_grouped.cuh grouped_experts_dec).
//
// Decode launches give an expert 1–8 slots, so the product is computed transposed: the expert's
// weight rows are the 16-row M side of mma.sync m16n8k16 (bf16 → fp32) and the chunk's slots the
// 8-wide N side, 8 slots per pass (padded with zero rows). A block per (column tile, chunk): the
// pass's activation rows are staged once in shared memory as bf16 (exact: the official numerics
// give FP8-quantized inputs), and each warp streams 16 or 32 weight rows of the expert over K.
//
// K order: the sum over k inside one mma is order-free, so a lane takes 32 contiguous elements
// of a weight row per 128-k step (one 16-byte FP4 load: one UE8M0 block; two for FP8, four for
// bf16) and the activations are read in the same permuted order. FP4 is decoded by bf16 bit
// placement and its block scale applied before the mma (e2m1 × 2^s is bf16-exact); FP8's 128×128
// scale is constant over a lane's 128-k step, so it multiplies the step's fp32 partial sum.
//
// FP4 (grouped_dec_kernel): the next D − 1 steps' weights and their UE8M0 scales are in flight
// while one step is multiplied (a ring of registers, no barrier; the scales used to be read in
// the step itself, a dependent load every step: FP4 at 64 / 256 tokens 26 / 21 % → 33 / 27 % of
// HBM). Shapes (ExpertDecShape): 16 · T weight rows a warp, D steps in the ring, W warps a block,
// P slots a pass (only the pass's real slots are staged; the other mma columns read zeros); speed
// only, the same bits in every shape. FP8 and bf16 (grouped_dec_wide_kernel) keep the kernel as
// it was: two tiles (bf16 one) a warp, 8-slot passes, the next step in registers.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "backend/cuda/expert_decode.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/moe_grouped.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kMaxWarps = 8, kKStep = 128, kPassRows = 8;
constexpr int64_t kMaxSmem = 200 * 1024;

// 16-byte words per lane and weight row per 128-k step, and the wide kernel's 16-row tiles per
// warp.
template <DevFormat F>
struct DecFmt {
  static constexpr int kWords = F == DevFormat::FP4 ? 1 : F == DevFormat::FP8 ? 2 : 4;
};
template <DevFormat F>
constexpr int kWideTiles = F == DevFormat::BF16 ? 1 : 2;

// fp4_bits: FP4 decoded by bit placement and a bf16 scale multiply (else through fp32).
struct DecArgs : ExpertLaunchArgs {
  bool fp4_bits = true;
  int pass_rows = kPassRows;  // P: slots staged per pass (≤ kPassRows)
};

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ uint32_t word_of(const uint4& q, int i) {
  return i == 0 ? q.x : i == 1 ? q.y : i == 2 ? q.z : q.w;
}

// Position of 16-byte unit u (8 bf16) of staged row r: within each 128-k step's 16 units, bit 1
// flips with bit 3 and bit 0 with the row's parity, so the 8 lanes of a quarter warp (two rows,
// units i, 4+i, 8+i, 12+i) read 8 different bank groups.
__device__ __forceinline__ int unit_at(int u, int r) { return u ^ (((u >> 3) & 1) << 1) ^ (r & 1); }

// mma.sync m16n8k16, bf16 inputs, fp32 accumulators in place.
__device__ __forceinline__ void mma16816(float* d, uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// A lane's raw weights of one 128-k step, [tile][row half (g, g + 8)][word], and FP4's block
// scales as loaded (the UE8M0 byte, or the float's bits), so they are in flight with the weights
// (each multiplies the weights before the mma). FP8's 128×128 scale is read in the step itself:
// it is needed only after the step's mma (measured: in the ring it cost FP8 ~20 %).
template <DevFormat F, int T>
struct StepRaw {
  uint4 q[T][2][DecFmt<F>::kWords];
  uint32_t s[T][2];
};

// k: this lane's first element of the step.
template <DevFormat F, int T>
__device__ __forceinline__ void load_step(const DevWeight& w, int64_t row0, int64_t out, int64_t k,
                                          StepRaw<F, T>& s) {
#pragma unroll
  for (int m = 0; m < T; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t o = row0 + 16 * m + 8 * h;
      if constexpr (F == DevFormat::FP4) s.s[m][h] = 0;  // (FP8 / bf16 never touch s)
      if (o >= out) {
#pragma unroll
        for (int i = 0; i < DecFmt<F>::kWords; ++i) s.q[m][h][i] = make_uint4(0, 0, 0, 0);
        continue;
      }
      const int64_t r = o + w.row0;
      if constexpr (F == DevFormat::FP4) {
        const int64_t si = r * w.scale_stride + k / w.block_in;
        s.s[m][h] = w.scale_f32 ? __ldg(reinterpret_cast<const uint32_t*>(w.scale) + si)
                                : static_cast<uint32_t>(__ldg(w.scale + si));
      }
      const uint8_t* base = F == DevFormat::FP4   ? w.data + ((r * w.stride + k) >> 1)
                            : F == DevFormat::FP8 ? w.data + r * w.stride + k
                                                  : w.data + 2 * (r * w.stride + k);
      const uint4* p = reinterpret_cast<const uint4*>(base);
#pragma unroll
      for (int i = 0; i < DecFmt<F>::kWords; ++i) s.q[m][h][i] = __ldg(p + i);
    }
}

// Group j (elements 8j … 8j+7) of a lane's 32 weights of one row, as 4 bf16x2 words. FP4 pairs
// elements (i, i + 4) in word i (the staged activations are paired the same way): with fac (the
// block scale 2^(u−127) as bf16x2 2^(u−1)), the e2m1 bits are placed at bf16 bits 8..6 (the value
// times 2^−126; e = 0 lands on the bf16 subnormals) and one bf16 multiply applies the scale,
// exactly; without (fac 0: float scales, u outside [1, 128]) through fp32 with sc (which also
// undoes e2m1x8's 2^−14). FP8 unscaled, natural pairs.
template <DevFormat F>
__device__ __forceinline__ void decode_group(const uint4* q, int j, float sc, uint32_t fac,
                                             uint32_t* out) {
  if constexpr (F == DevFormat::FP4) {
    const uint32_t c = word_of(q[0], j);
    if (fac != 0) {
      e2m1x8_bf16_scaled(c, fac, out);
    } else {
      float v[8];
      e2m1x8(c, v);
#pragma unroll
      for (int i = 0; i < 4; ++i) out[i] = pack_bf16(v[i] * sc, v[i + 4] * sc);
    }
  } else if constexpr (F == DevFormat::FP8) {
    (void)sc, (void)fac;
    float v[8];
    e4m3x4(word_of(q[j / 2], 2 * (j % 2)), v);
    e4m3x4(word_of(q[j / 2], 2 * (j % 2) + 1), v + 4);
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = pack_bf16(v[2 * i], v[2 * i + 1]);
  } else {
    (void)sc, (void)fac;
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = word_of(q[j], i);
  }
}

// The step's block scales from their raw bits: sc (FP4: times 2^14, undoing e2m1x8's 2^-14; FP8:
// the float) and fac (FP4: the scale as a bf16x2 factor of the placed bits, 0 where it cannot be).
template <DevFormat F, int T>
__device__ __forceinline__ void step_scales(const StepRaw<F, T>& raw, const DevWeight& w,
                                            int64_t row0, int64_t out, int64_t k0, bool fp4_bits,
                                            float (&sc)[T][2], uint32_t (&fac)[T][2]) {
  const bool scale_f32 = w.scale_f32;
#pragma unroll
  for (int m = 0; m < T; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t u = raw.s[m][h];
      fac[m][h] = 0;
      if constexpr (F == DevFormat::FP4) {
        sc[m][h] =
            (scale_f32 ? __uint_as_float(u) : ue8m0_to_float(static_cast<uint8_t>(u))) * 0x1p14f;
        if (!scale_f32 && fp4_bits && u >= 1 && u <= 128)
          fac[m][h] = ((u + 126u) << 7) * 0x00010001u;
      } else if constexpr (F == DevFormat::FP8) {
        const int64_t o = row0 + 16 * m + 8 * h;
        sc[m][h] = o < out ? w.scale_at((o + w.row0) / w.block_out, k0 / w.block_in) : 0.0f;
      } else {
        sc[m][h] = 1.0f;
      }
    }
}

// One 128-k step of a warp's T tiles into acc: the lane's weights decoded group by group, times
// the staged activations bx (zeros for a column past the pass's slots).
template <DevFormat F, int T>
__device__ __forceinline__ void mma_step(const StepRaw<F, T>& cur, const uint4* xrow, bool live,
                                         const DevWeight& w, int64_t row0, int64_t out, int k0,
                                         int k, int g, bool fp4_bits, float (&acc)[T][4]) {
  float sc[T][2];
  uint32_t fac[T][2];
  step_scales<F, T>(cur, w, row0, out, k0, fp4_bits, sc, fac);
  float part[T][4];  // FP8: the step's unscaled sums
#pragma unroll
  for (int m = 0; m < T; ++m)
#pragma unroll
    for (int c = 0; c < 4; ++c) part[m][c] = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint4 bx = live ? xrow[unit_at((k >> 3) + j, g)] : make_uint4(0, 0, 0, 0);
    uint32_t wd[T][2][4];
#pragma unroll
    for (int m = 0; m < T; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h) decode_group<F>(cur.q[m][h], j, sc[m][h], fac[m][h], wd[m][h]);
#pragma unroll
    for (int s = 0; s < 2; ++s)
#pragma unroll
      for (int m = 0; m < T; ++m)
        mma16816(F == DevFormat::FP8 ? part[m] : acc[m], wd[m][0][2 * s], wd[m][1][2 * s],
                 wd[m][0][2 * s + 1], wd[m][1][2 * s + 1], word_of(bx, 2 * s),
                 word_of(bx, 2 * s + 1));
  }
  if constexpr (F == DevFormat::FP8) {
#pragma unroll
    for (int m = 0; m < T; ++m) {
      acc[m][0] = fmaf(part[m][0], sc[m][0], acc[m][0]);
      acc[m][1] = fmaf(part[m][1], sc[m][0], acc[m][1]);
      acc[m][2] = fmaf(part[m][2], sc[m][1], acc[m][2]);
      acc[m][3] = fmaf(part[m][3], sc[m][1], acc[m][3]);
    }
  }
}

// grid (tiles × products, chunks), blockDim.x / 32 warps; each warp 16 · T weight rows, D steps
// of its weights in registers.
template <DevFormat F, int T, int D>
__global__ void __launch_bounds__(32 * kMaxWarps, 2) grouped_dec_kernel(DecArgs a) {
  pdl_begin();
  extern __shared__ uint4 dec_smem[];
  __shared__ int32_t slot[kPassRows];
  const int chunk = blockIdx.y;
  if (chunk >= *a.plan.n_chunks) return;  // the whole block: before any barrier
  const int expert = a.plan.chunks[3 * chunk], first = a.plan.chunks[3 * chunk + 1],
            count = a.plan.chunks[3 * chunk + 2];
  const bool second = static_cast<int>(blockIdx.x) >= a.tiles;
  const ExpertProduct prod = second ? a.b : a.a;
  const DevWeight w = prod.experts[expert];
  const int warps = static_cast<int>(blockDim.x) >> 5;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int tile = static_cast<int>(blockIdx.x) - (second ? a.tiles : 0);
  const int64_t row0 = (static_cast<int64_t>(tile) * warps + warp) * (16 * T) + g;
  const int in = static_cast<int>(a.in), units = in / 8, steps = in / kKStep;
  const int P = a.pass_rows;
  const uint4* xrow = dec_smem + g * units;  // this lane's slot row (N index g)
  for (int s0 = 0; s0 < count; s0 += P) {
    const int nr = min(P, count - s0);
    StepRaw<F, T> ring[D];
#pragma unroll
    for (int d = 0; d + 1 < D; ++d)  // in flight during the staging
      if (d < steps) load_step<F, T>(w, row0, a.out, d * kKStep + 32 * t, ring[d]);
    __syncthreads();  // the last pass is done with the staged rows and slot
    if (static_cast<int>(threadIdx.x) < nr)
      slot[threadIdx.x] = a.plan.sorted[first + s0 + static_cast<int>(threadIdx.x)];
    __syncthreads();
    for (int i = threadIdx.x; i < nr * units; i += blockDim.x) {
      const int r = i / units, u = i % units;
      const int64_t row = a.x_per_slot ? slot[r] : slot[r] / a.K;
      const float4* p = reinterpret_cast<const float4*>(a.x + row * a.in + 8 * u);
      const float4 x0 = p[0], x1 = p[1];
      uint4 v;
      if constexpr (F == DevFormat::FP4) {  // pairs (i, i + 4), as decode_group's
        v = make_uint4(pack_bf16(x0.x, x1.x), pack_bf16(x0.y, x1.y), pack_bf16(x0.z, x1.z),
                       pack_bf16(x0.w, x1.w));
      } else {
        v = make_uint4(pack_bf16(x0.x, x0.y), pack_bf16(x0.z, x0.w), pack_bf16(x1.x, x1.y),
                       pack_bf16(x1.z, x1.w));
      }
      dec_smem[r * units + unit_at(u, r)] = v;
    }
    __syncthreads();
    if (row0 - g >= a.out) continue;
    const bool live = g < nr;
    float acc[T][4];
#pragma unroll
    for (int m = 0; m < T; ++m)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[m][c] = 0.0f;
    for (int b = 0; b < steps; b += D) {
#pragma unroll
      for (int d = 0; d < D; ++d) {
        const int st = b + d;  // step st is in ring[d]; step st + D − 1 goes where st − 1 was
        if (st < steps) {
          const int ahead = st + D - 1;
          if (ahead < steps)
            load_step<F, T>(w, row0, a.out, ahead * kKStep + 32 * t, ring[(d + D - 1) % D]);
          mma_step<F, T>(ring[d], xrow, live, w, row0, a.out, st * kKStep, st * kKStep + 32 * t, g,
                         a.fp4_bits, acc);
        }
      }
    }
    // acc[m][c]: weight row row0 + 16m + 8 (c / 2), slot column 2t + (c % 2).
#pragma unroll
    for (int m = 0; m < T; ++m)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int n = 2 * t + (c & 1);
        const int64_t o = row0 + 16 * m + 8 * (c >> 1);
        if (n < nr && o < a.out) {
          const float v = acc[m][c];
          prod.y[static_cast<int64_t>(slot[n]) * a.ldy + o] = a.round_out ? bf16r(v) : v;
        }
      }
  }
}

template <DevFormat F, int T, int D>
void launch(Exec& e, const DecArgs& a, dim3 grid, int warps) {
  const size_t smem = static_cast<size_t>(a.pass_rows * a.in * 2);
  static bool raised = false;  // once per instantiation, before any capture needs it
  if (!raised) {
    cudaFuncSetAttribute(grouped_dec_kernel<F, T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(kMaxSmem));
    raised = true;
  }
  e.launch(grouped_dec_kernel<F, T, D>, grid, 32 * warps, smem, a);
  e.note(cudaGetLastError());
}

// ---- FP8 and bf16: the kernel before the shapes above (main's numbers held; the ring version
// cost FP8 12–25 % on the H200, from register spills), two tiles (bf16 one) a warp, 8-slot passes,
// the next step's weights in registers. The same sums as grouped_dec_kernel's. ----

// The FP8 / bf16 kernel's raw weights of one 128-k step: [tile][row half (g, g + 8)][word].
template <DevFormat F>
struct StepRawWide {
  uint4 q[kWideTiles<F>][2][DecFmt<F>::kWords];
};

template <DevFormat F>
__device__ __forceinline__ void load_step_wide(const DevWeight& w, int64_t row0, int64_t out,
                                               int64_t k, StepRawWide<F>& s) {
#pragma unroll
  for (int m = 0; m < kWideTiles<F>; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t o = row0 + 16 * m + 8 * h;
      if (o >= out) {
#pragma unroll
        for (int i = 0; i < DecFmt<F>::kWords; ++i) s.q[m][h][i] = make_uint4(0, 0, 0, 0);
        continue;
      }
      const int64_t r = o + w.row0;
      const uint8_t* base = F == DevFormat::FP4   ? w.data + ((r * w.stride + k) >> 1)
                            : F == DevFormat::FP8 ? w.data + r * w.stride + k
                                                  : w.data + 2 * (r * w.stride + k);
      const uint4* p = reinterpret_cast<const uint4*>(base);
#pragma unroll
      for (int i = 0; i < DecFmt<F>::kWords; ++i) s.q[m][h][i] = __ldg(p + i);
    }
}

// grid (tiles × products, chunks), blockDim.x / 32 warps; each warp 16 · kWideTiles weight rows.
template <DevFormat F>
__global__ void __launch_bounds__(32 * kMaxWarps, 2) grouped_dec_wide_kernel(DecArgs a) {
  pdl_begin();
  constexpr int T = kWideTiles<F>;
  extern __shared__ uint4 dec_smem[];
  __shared__ int32_t slot[kPassRows];
  const int chunk = blockIdx.y;
  if (chunk >= *a.plan.n_chunks) return;  // the whole block: before any barrier
  const int expert = a.plan.chunks[3 * chunk], first = a.plan.chunks[3 * chunk + 1],
            count = a.plan.chunks[3 * chunk + 2];
  const bool second = static_cast<int>(blockIdx.x) >= a.tiles;
  const ExpertProduct prod = second ? a.b : a.a;
  const DevWeight w = prod.experts[expert];
  const int warps = static_cast<int>(blockDim.x) >> 5;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int tile = static_cast<int>(blockIdx.x) - (second ? a.tiles : 0);
  const int64_t row0 = (static_cast<int64_t>(tile) * warps + warp) * (16 * T) + g;
  const int in = static_cast<int>(a.in), units = in / 8;
  const uint4* xrow = dec_smem + g * units;  // this lane's slot row (N index g)
  for (int s0 = 0; s0 < count; s0 += kPassRows) {
    const int nr = min(kPassRows, count - s0);
    StepRawWide<F> cur;
    load_step_wide<F>(w, row0, a.out, 32 * t, cur);  // in flight during the staging
    __syncthreads();  // the last pass is done with the staged rows and slot
    if (threadIdx.x < kPassRows)
      slot[threadIdx.x] = static_cast<int>(threadIdx.x) < nr
                              ? a.plan.sorted[first + s0 + static_cast<int>(threadIdx.x)]
                              : -1;
    __syncthreads();
    for (int i = threadIdx.x; i < kPassRows * units; i += blockDim.x) {
      const int r = i / units, u = i % units;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (r < nr) {
        const int64_t row = a.x_per_slot ? slot[r] : slot[r] / a.K;
        const float4* p = reinterpret_cast<const float4*>(a.x + row * a.in + 8 * u);
        const float4 x0 = p[0], x1 = p[1];
        if constexpr (F == DevFormat::FP4) {  // pairs (i, i + 4), as decode_group's
          v = make_uint4(pack_bf16(x0.x, x1.x), pack_bf16(x0.y, x1.y), pack_bf16(x0.z, x1.z),
                         pack_bf16(x0.w, x1.w));
        } else {
          v = make_uint4(pack_bf16(x0.x, x0.y), pack_bf16(x0.z, x0.w), pack_bf16(x1.x, x1.y),
                         pack_bf16(x1.z, x1.w));
        }
      }
      dec_smem[r * units + unit_at(u, r)] = v;
    }
    __syncthreads();
    if (row0 - g >= a.out) continue;
    float acc[T][4];
#pragma unroll
    for (int m = 0; m < T; ++m)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[m][c] = 0.0f;
    for (int k0 = 0; k0 < in; k0 += kKStep) {
      const int k = k0 + 32 * t;  // this lane's 32 elements
      StepRawWide<F> next;
      if (k0 + kKStep < in) load_step_wide<F>(w, row0, a.out, k + kKStep, next);
      float sc[T][2];      // FP4: per row and block; FP8: per row's 128×128 block (after the step)
      uint32_t fac[T][2];  // FP4: the scale as a bf16x2 factor of the placed bits (0: none)
#pragma unroll
      for (int m = 0; m < T; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t r = row0 + 16 * m + 8 * h + w.row0;
          const bool ok = row0 + 16 * m + 8 * h < a.out;
          fac[m][h] = 0;
          if constexpr (F == DevFormat::FP4) {
            sc[m][h] = ok ? w.scale_at(r, k / w.block_in) * 0x1p14f : 0.0f;
            const uint32_t u = ok && !w.scale_f32 && a.fp4_bits
                                   ? w.scale[r * w.scale_stride + k / w.block_in]
                                   : 0u;
            if (u >= 1 && u <= 128) fac[m][h] = ((u + 126u) << 7) * 0x00010001u;
          } else if constexpr (F == DevFormat::FP8) {
            sc[m][h] = ok ? w.scale_at(r / w.block_out, k0 / w.block_in) : 0.0f;
          } else {
            sc[m][h] = 1.0f;
          }
        }
      float part[T][4];  // FP8: the step's unscaled sums
#pragma unroll
      for (int m = 0; m < T; ++m)
#pragma unroll
        for (int c = 0; c < 4; ++c) part[m][c] = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint4 bx = xrow[unit_at((k >> 3) + j, g)];
        uint32_t wd[T][2][4];
#pragma unroll
        for (int m = 0; m < T; ++m)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            decode_group<F>(cur.q[m][h], j, sc[m][h], fac[m][h], wd[m][h]);
#pragma unroll
        for (int s = 0; s < 2; ++s)
#pragma unroll
          for (int m = 0; m < T; ++m)
            mma16816(F == DevFormat::FP8 ? part[m] : acc[m], wd[m][0][2 * s], wd[m][1][2 * s],
                     wd[m][0][2 * s + 1], wd[m][1][2 * s + 1], word_of(bx, 2 * s),
                     word_of(bx, 2 * s + 1));
      }
      if constexpr (F == DevFormat::FP8) {
#pragma unroll
        for (int m = 0; m < T; ++m) {
          acc[m][0] = fmaf(part[m][0], sc[m][0], acc[m][0]);
          acc[m][1] = fmaf(part[m][1], sc[m][0], acc[m][1]);
          acc[m][2] = fmaf(part[m][2], sc[m][1], acc[m][2]);
          acc[m][3] = fmaf(part[m][3], sc[m][1], acc[m][3]);
        }
      }
      if (k0 + kKStep < in) cur = next;
    }
    // acc[m][c]: weight row row0 + 16m + 8 (c / 2), slot column 2t + (c % 2).
#pragma unroll
    for (int m = 0; m < T; ++m)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int n = 2 * t + (c & 1);
        const int64_t o = row0 + 16 * m + 8 * (c >> 1);
        if (n < nr && o < a.out) {
          const float v = acc[m][c];
          prod.y[static_cast<int64_t>(slot[n]) * a.ldy + o] = a.round_out ? bf16r(v) : v;
        }
      }
  }
}

template <DevFormat F>
void launch_wide(Exec& e, const DecArgs& a, dim3 grid, int warps) {
  const size_t smem = static_cast<size_t>(kPassRows * a.in * 2);
  static bool raised = false;  // once per instantiation, before any capture needs it
  if (!raised) {
    cudaFuncSetAttribute(grouped_dec_wide_kernel<F>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(kMaxSmem));
    raised = true;
  }
  e.launch(grouped_dec_wide_kernel<F>, grid, 32 * warps, smem, a);
  e.note(cudaGetLastError());
}

bool g_dec = env_switch("DEEPINFER_CUDA_EXPERTS_DECODE_TC", true);
bool g_fp4_bits = env_switch("DEEPINFER_CUDA_EXPERTS_DECODE_FP4_BITS", true);

int64_t min_slots_from_env() {  // 0: the default (FP4 E / 8, else E / 2)
  const char* v = std::getenv("DEEPINFER_CUDA_EXPERTS_DECODE_TC_MIN_SLOTS");
  return v && *v ? std::max<int64_t>(1, std::atoll(v)) : 0;
}
const int64_t g_dec_min_slots = min_slots_from_env();

ExpertDecShape shape_from_env() {  // "T,D,W,P"; unset: {} (by the launch)
  ExpertDecShape s;
  const char* v = std::getenv("DEEPINFER_CUDA_EXPERTS_DECODE_SHAPE");
  if (v && *v) std::sscanf(v, "%d,%d,%d,%d", &s.tiles, &s.depth, &s.warps, &s.pass);
  return s;
}
ExpertDecShape g_shape = shape_from_env();

// The (T, D) pairs instantiated.
bool shape_built(int T, int D) {
  return (T == 1 && (D == 2 || D == 4 || D == 8)) || (T == 2 && (D == 2 || D == 4));
}

template <DevFormat F>
void launch_shape(Exec& e, const DecArgs& a, dim3 grid, int warps, int T, int D) {
  if (T == 1 && D == 4) return launch<F, 1, 4>(e, a, grid, warps);
  if (T == 1 && D == 8) return launch<F, 1, 8>(e, a, grid, warps);
  if (T == 1) return launch<F, 1, 2>(e, a, grid, warps);
  if (D == 4) return launch<F, 2, 4>(e, a, grid, warps);
  return launch<F, 2, 2>(e, a, grid, warps);
}

}  // namespace

void set_experts_decode_tc(bool on) { g_dec = on; }
bool experts_decode_tc() { return g_dec; }
void set_experts_dec_shape(const ExpertDecShape& s) { g_shape = s; }

ExpertDecShape experts_dec_shape(int64_t n_slots, int E, DevFormat format) {
  if (format != DevFormat::FP4) return {format == DevFormat::BF16 ? 1 : 2, 2, 0, kPassRows};
  if (g_shape.tiles > 0 && shape_built(g_shape.tiles, g_shape.depth) && g_shape.pass >= 1 &&
      g_shape.pass <= kPassRows && g_shape.warps >= 0 && g_shape.warps <= kMaxWarps)
    return g_shape;
  // Below E / 2 slots (mostly one an expert): one tile a warp, 4-warp blocks, 2-slot passes
  // (H200, 4 / 21 tokens: 0.217 / 0.892 ms vs 0.274 / 0.925 ms with {2, 2, 0, 8}).
  if (n_slots < std::max(1, E / 2)) return {1, 2, 4, 2};
  return {2, 2, 0, kPassRows};
}
int64_t experts_decode_tc_min_slots(int E, DevFormat format) {
  if (g_dec_min_slots > 0) return g_dec_min_slots;
  return std::max(1, format == DevFormat::FP4 ? E / 8 : E / 2);
}

bool grouped_experts_dec_supported(int64_t in, DevFormat format) {
  return fast_kernels() && in > 0 && in % kKStep == 0 && kPassRows * in * 2 <= kMaxSmem &&
         (format == DevFormat::FP4 || format == DevFormat::FP8 || format == DevFormat::BF16);
}

void grouped_experts_dec(Exec& e, const ExpertPlan& plan, int64_t n_slots, int E, const float* x,
                         bool x_per_slot, int K, const ExpertProduct& a, const ExpertProduct& b,
                         int64_t ldy, int64_t out, int64_t in, bool official, DevFormat format) {
  if (n_slots <= 0) return;
  DecArgs g;
  static_cast<ExpertLaunchArgs&>(g) =
      expert_launch_args(plan, x, x_per_slot, K, a, b, ldy, out, in, official, format);
  g.fp4_bits = g_fp4_bits;
  const ExpertDecShape shape = experts_dec_shape(n_slots, E, format);
  g.pass_rows = shape.pass;
  const int64_t chunks = expert_max_chunks(n_slots, E);
  const int rows_per_warp = 16 * shape.tiles;
  // Without a set block size, fewer warps per block (narrower tiles) when few chunks would leave
  // SMs idle; speed only.
  int warps = shape.warps > 0 ? shape.warps : kMaxWarps;
  const int products = b.experts ? 2 : 1;
  const auto blocks = [&](int w) {
    return chunks * products * ((out + rows_per_warp * w - 1) / (rows_per_warp * w));
  };
  while (shape.warps == 0 && warps > 2 && blocks(warps) < 4 * 132) warps /= 2;
  const int64_t cols = static_cast<int64_t>(rows_per_warp) * warps;
  g.tiles = static_cast<int>((out + cols - 1) / cols);
  const dim3 grid(static_cast<unsigned>(g.tiles * products), static_cast<unsigned>(chunks));
  switch (format) {
    case DevFormat::FP4:
      launch_shape<DevFormat::FP4>(e, g, grid, warps, shape.tiles, shape.depth);
      break;
    case DevFormat::FP8:
      launch_wide<DevFormat::FP8>(e, g, grid, warps);
      break;
    case DevFormat::BF16:
      launch_wide<DevFormat::BF16>(e, g, grid, warps);
      break;
    case DevFormat::F32:
      break;  // not supported (grouped_experts_dec_supported)
  }
}

}  // namespace deepinfer::cuda
