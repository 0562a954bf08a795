// The tensor-core GEMV's device pieces (gemv_mma.cu's K-split launches): the block shape, the
// FP8 / FP4 decodes to f16, the inputs' staging in shared memory and one K step of a warp's
// 16-row tile.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "backend/cuda/expert_decode.cuh"
#include "backend/cuda/formats.cuh"
#include "backend/cuda/gemv_mma.cuh"
#include "backend/cuda/row_reduce.cuh"
#include "backend/cuda/swiglu_value.cuh"

namespace deepinfer::cuda::mma {

// A block: 8 warps, each a 16-row mma tile, so 128 rows (one FP8 scale row). Along K it takes a
// slice of 1/S of the row, S blocks of a cluster sharing the rows; rank s sums 1/S of them over
// the cluster's slices in rank order through distributed shared memory. Each warp keeps 3 K steps
// of 2 KB in flight in registers; two blocks fit an SM (H200 kernel check: one block of twice
// the depth per SM, and rings of 4 or 8 steps in shared memory filled by cp.async, streamed
// slower).
constexpr int kWarps = 8, kThreads = 32 * kWarps, kTileRows = 16 * kWarps;
constexpr int kMaxRows = 8;  // the mma's 8 columns

// Routed experts at one token: job p · slots + s is product p of slot s, its weights
// experts[p][idx[s]], its input row x + (s or s / per_token) · ldx, its output y[p] + s · ldy.
struct ExpertJobs {
  const DevWeight* experts[2];
  float* y[2];
  const int32_t* idx;
  const float* x;
  int64_t ldx, ldy;
  int slots, per_token, tiles;  // tiles: per job
  bool x_per_slot;
  const float* swiglu_h3;  // non-null: x is w1's output, staged through swiglu_quant's steps
  const float* swiglu_row_w;
  float swiglu_limit;
  bool swiglu_official;
};

// The jobs of one experts_mma launch.
inline ExpertJobs expert_jobs(const ExpertMmaProducts& p, const int32_t* idx, int slots,
                              int per_token, const float* x, int64_t ldx, bool x_per_slot,
                              int64_t ldy) {
  ExpertJobs X{};
  for (int i = 0; i < p.count; ++i) X.experts[i] = p.experts[i], X.y[i] = p.y[i];
  X.idx = idx;
  X.x = x;
  X.ldx = ldx;
  X.ldy = ldy;
  X.slots = slots;
  X.per_token = per_token;
  X.x_per_slot = x_per_slot;
  X.tiles = static_cast<int>((p.out + kTileRows - 1) / kTileRows);
  X.swiglu_h3 = p.swiglu_h3;
  X.swiglu_row_w = p.swiglu_row_w;
  X.swiglu_limit = p.swiglu_limit;
  X.swiglu_official = p.swiglu_official;
  return X;
}

// Two e4m3 codes (the low 16 bits) as an fp16 pair, the lower code in the lower half (exact).
__device__ __forceinline__ uint32_t fp8x2_to_half2(uint32_t codes) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

__device__ __forceinline__ void mma_f16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Read once per step: not kept in L1; the next 128 bytes of the row fetched into L2 with it.
__device__ __forceinline__ uint4 load_weights(const uint8_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Shared memory of the inputs' 16-bit copy and their scales.
constexpr size_t input_bytes(int64_t n, int64_t slice, int step) {
  return static_cast<size_t>(n * slice) * 2 + static_cast<size_t>(n * (slice / step)) * 4;
}
// The most of the inputs' 16-bit copy a block stages (the launches split K to stay under it), and
// input_bytes' most with it (a scale per 128 values).
constexpr size_t kMaxInputCopyBytes = 32 * 1024;
constexpr size_t kMaxInputBytes = kMaxInputCopyBytes + kMaxInputCopyBytes / 2 / 128 * 4;

// The f16 pair 2^(u − 121): the block scale 2^(u − 127) over e2m1x8_e4m3's 2^−6, for u in
// [104, 136], where every e2m1 value times the scale is exact in f16 (2^−24 … 6 · 2^9); 0 outside
// (the step then takes fp4_step_exact).
__device__ __forceinline__ uint32_t fp4_f16_fac(uint32_t u) {
  const uint32_t h = u >= 107 ? (u - 106) << 10 : 1u << ((u - 97) & 31);  // f16 subnormals below
  return u >= 104 && u <= 136 ? h * 0x00010001u : 0u;
}

// The e2m1 codes of a word (codes 0 … 7) as 4 f16 pairs times the block scale, exactly: e4m3 codes
// by bit placement, one conversion a pair, one f16 multiply. Pairs (0, 2), (4, 6), (1, 3), (5, 7).
__device__ __forceinline__ void fp4_word_f16(uint32_t q, uint32_t fac, uint32_t* out) {
  uint32_t even, odd;
  e2m1x8_e4m3(q, even, odd);
  const uint32_t codes[4] = {even, even >> 16, odd, odd >> 16};
  const __half2 f = *reinterpret_cast<const __half2*>(&fac);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t h = fp8x2_to_half2(codes[i]);
    const __half2 v = __hmul2(*reinterpret_cast<const __half2*>(&h), f);
    out[i] = *reinterpret_cast<const uint32_t*>(&v);
  }
}

// 2^(u − 113) as an f16 pair: the block scale over fp4_word_f16_int's 2^−14, for u in [104, 128]
// (the products exact as above, the factor itself an f16); 0 outside.
__device__ __forceinline__ uint32_t fp4_f16_fac_int(uint32_t u) {
  return u >= 104 && u <= 128 ? ((u - 98) << 10) * 0x00010001u : 0u;
}

// fp4_word_f16 without conversion instructions (they issue at a quarter of the integer rate): a
// byte with the sign at bit 7 and e1 e0 m at bits 3..1, as an f16's high byte, is the e2m1 value
// times 2^−14 (e = 0 on the f16 subnormals); byte permutes spread the bytes, one f16 multiply by
// fac = fp4_f16_fac_int applies the scale. Same pair order as fp4_word_f16.
__device__ __forceinline__ void fp4_word_f16_int(uint32_t q, uint32_t fac, uint32_t* out) {
  const uint32_t even = ((q << 1) & 0x0e0e0e0eu) | ((q << 4) & 0x80808080u);  // codes 0, 2, 4, 6
  const uint32_t odd = ((q >> 3) & 0x0e0e0e0eu) | (q & 0x80808080u);          // codes 1, 3, 5, 7
  const uint32_t h[4] = {__byte_perm(even, 0u, 0x1404), __byte_perm(even, 0u, 0x3424),
                         __byte_perm(odd, 0u, 0x1404), __byte_perm(odd, 0u, 0x3424)};
  const __half2 f = *reinterpret_cast<const __half2*>(&fac);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __half2 v = __hmul2(*reinterpret_cast<const __half2*>(&h[i]), f);
    out[i] = *reinterpret_cast<const uint32_t*>(&v);
  }
}

// Where the shared memory's 8-value group keeps value i (fp4_word_f16's pair order).
__device__ __forceinline__ int fp4_slot(int i) { return (i & 1) ? 4 + i / 2 : i / 2; }

// One K step of an FP4 tile at one input row in fp32, for block scales outside the f16 decodes'
// range (fp4_f16_fac's, fp4_f16_fac_int's): the lane's 64 values of rows a and b (w[0], w[1]: its
// chunks of row a; w[2], w[3]: row b) against input row 0 (xs: the step's 256 values, xinv: their
// two 128-value scales), summed over the row's 4 lanes. Rare: real checkpoints' scales sit near
// 2^−7.
__device__ __forceinline__ float2 fp4_step_exact(uint4 w0, uint4 w1, uint4 w2, uint4 w3, uint2 sa,
                                                 uint2 sb, const uint16_t* xs, const float* xinv,
                                                 int t) {
  const uint4 w[4] = {w0, w1, w2, w3};
  float sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    const uint32_t ua = ((c ? sa.y : sa.x) >> (8 * t)) & 0xffu;
    const uint32_t ub = ((c ? sb.y : sb.x) >> (8 * t)) & 0xffu;
    // e2m1x8 gives the values times 2^-14.
    const float scale[2] = {ue8m0_to_float(static_cast<uint8_t>(ua)) * 0x1p14f,
                            ue8m0_to_float(static_cast<uint8_t>(ub)) * 0x1p14f};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint16_t* xg = xs + 128 * c + 32 * t + 8 * j;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const uint4& q = w[2 * r + c];
        float v[8];
        e2m1x8(j == 0 ? q.x : j == 1 ? q.y : j == 2 ? q.z : q.w, v);
        for (int i = 0; i < 8; ++i)
          sum[r] += v[i] * scale[r] * (__half2float(__ushort_as_half(xg[fp4_slot(i)])) * xinv[c]);
      }
    }
  }
  for (int off = 1; off < 4; off <<= 1) {
    sum[0] += __shfl_xor_sync(0xffffffffu, sum[0], off);
    sum[1] += __shfl_xor_sync(0xffffffffu, sum[1], off);
  }
  return make_float2(sum[0], sum[1]);
}

// Inputs made from w1's and w3's outputs by the SwiGLU and its FP8 copy (swiglu_quant's steps):
// x is w1's row, h3 w3's, row_w the slot's routing weight (or null).
struct SwigluStage {
  const float* h3;
  const float* row_w;
  float limit;
  bool official;
};

// Values [i, i + 4) of the SwiGLU (x: w1's outputs at i, sw->h3 + (x_at − x) w3's).
__device__ __forceinline__ float4 swiglu4(const float* x_at, int64_t off, const SwigluStage& sw) {
  const float4 g = *reinterpret_cast<const float4*>(x_at);
  const float4 u = *reinterpret_cast<const float4*>(sw.h3 + off);
  return make_float4(swiglu_value(g.x, u.x, sw.limit, sw.row_w, sw.official),
                     swiglu_value(g.y, u.y, sw.limit, sw.row_w, sw.official),
                     swiglu_value(g.z, u.z, sw.limit, sw.row_w, sw.official),
                     swiglu_value(g.w, u.w, sw.limit, sw.row_w, sw.official));
}
__device__ __forceinline__ float4 fp8_act4(float4 v, float s) {
  return make_float4(fp8_act_value(v.x, s), fp8_act_value(v.y, s), fp8_act_value(v.z, s),
                     fp8_act_value(v.w, s));
}
__device__ __forceinline__ float amax4(float4 v) {
  return fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
}

// The block's input rows over its K slice in shared memory: fp16, each 128 values times a power of
// two that puts their largest in [2^14, 2^15) (exact for FP8-quantized and bf16 values), and the
// inverse of that power per (row, 128 values). FP4: each 8 in fp4_slot's order. sw (one input
// row): the inputs are made by the SwiGLU from x and sw->h3 first, each 128-value block's FP8
// copy at its own scale as swiglu_quant writes it.
template <DevFormat F>
__device__ __forceinline__ void stage_inputs(const float* x, int64_t ldx, int n, int64_t k0,
                                             int slice, uint16_t* xh, float* xinv,
                                             const SwigluStage* sw = nullptr) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if constexpr (F == DevFormat::FP8) {
    const int steps = slice >> 7;
    for (int b = warp; b < n * steps; b += kWarps) {
      const int r = b / steps, kb = b % steps;
      const int64_t off = r * ldx + k0 + kb * 128 + lane * 4;
      float4 v;
      if (sw) {  // a warp is one 128-value block of the FP8 copy
        v = swiglu4(x + off, off, *sw);
        v = fp8_act4(v, fp8_act_scale(warp_max(amax4(v))));
      } else {
        v = *reinterpret_cast<const float4*>(x + off);
      }
      const float amax = warp_max(amax4(v));
      const int e = max(static_cast<int>((__float_as_uint(amax) >> 23) & 0xffu), 15);
      const float p = __uint_as_float(static_cast<uint32_t>(268 - e) << 23);  // 2^(141 - e)
      const __half2 lo = __floats2half2_rn(v.x * p, v.y * p);
      const __half2 hi = __floats2half2_rn(v.z * p, v.w * p);
      uint2 packed;
      packed.x = *reinterpret_cast<const uint32_t*>(&lo);
      packed.y = *reinterpret_cast<const uint32_t*>(&hi);
      *reinterpret_cast<uint2*>(xh + r * slice + kb * 128 + lane * 4) = packed;
      if (lane == 0) xinv[r * steps + kb] = __uint_as_float(static_cast<uint32_t>(e - 14) << 23);
    }
  } else {
    const int passes = slice >> 8;  // a warp's pass: 256 values, a half-warp's 128 one scale
    for (int b = warp; b < n * passes; b += kWarps) {
      const int r = b / passes, kb = b % passes;
      const int64_t off = r * ldx + k0 + kb * 256 + lane * 8;
      float4 a, c;
      if (sw) {  // a half-warp is one 128-value block of the FP8 copy
        a = swiglu4(x + off, off, *sw);
        c = swiglu4(x + off + 4, off + 4, *sw);
        const float s = fp8_act_scale(half_warp_max(fmaxf(amax4(a), amax4(c))));
        a = fp8_act4(a, s), c = fp8_act4(c, s);
      } else {
        const float4* p = reinterpret_cast<const float4*>(x + off);
        a = p[0], c = p[1];
      }
      const float amax = half_warp_max(fmaxf(amax4(a), amax4(c)));
      const int e = max(static_cast<int>((__float_as_uint(amax) >> 23) & 0xffu), 15);
      const float q = __uint_as_float(static_cast<uint32_t>(268 - e) << 23);  // 2^(141 - e)
      const __half2 h[4] = {
          __floats2half2_rn(a.x * q, a.z * q), __floats2half2_rn(c.x * q, c.z * q),
          __floats2half2_rn(a.y * q, a.w * q), __floats2half2_rn(c.y * q, c.w * q)};
      *reinterpret_cast<uint4*>(xh + r * slice + kb * 256 + lane * 8) =
          *reinterpret_cast<const uint4*>(h);
      if ((lane & 15) == 0)
        xinv[r * (slice >> 7) + kb * 2 + (lane >> 4)] =
            __uint_as_float(static_cast<uint32_t>(e - 14) << 23);
    }
  }
}

// The lane's two 16-byte chunks of a step's 128 bytes of a row: [lo, lo + 16), [hi, hi + 16).
// FP8: [32t, 32t + 32), so a quad's load instruction takes half of each of 4 sectors, or
// (full_sectors) FP4's [16t, 16t + 16) and [64 + 16t, 80 + 16t), whole sectors an instruction;
// FP4 so that each mma's 16 values of a row also lie in one 128-value block of the inputs' scales.
struct LaneChunks {
  int lo, hi;
};
template <DevFormat F>
__device__ __forceinline__ LaneChunks lane_chunks(int t, bool full_sectors) {
  const bool full = F == DevFormat::FP4 || full_sectors;
  return full ? LaneChunks{t * 16, 64 + t * 16} : LaneChunks{t * 32, t * 32 + 16};
}

// The FP4 decode (fp4_int_decode()'s 0, 1 or 2) as a constant: f(std::integral_constant<int, d>).
template <class Fn>
decltype(auto) with_int_decode(int decode, Fn&& f) {
  switch (decode) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    default:
      return f(std::integral_constant<int, 0>{});
  }
}

// Lane (g, t) of a warp holds 32 bytes of its tile's rows g and g + 8 in each K step (128 values
// FP8, 256 FP4); the mma's k order is free as long as both operands share it. FP8: the lane's
// chunks [lo, lo + 16) and [hi, hi + 16) of the step's 128 bytes of a row; the j-th of a step's 8
// mmas takes the lane's word j of both rows (4 codes) against the same four inputs of batch row g
// (the mma's column), and the step's sums are scaled by the weight's block scale (wscale) and the
// inputs'. FP4 (H200: the bf16 decode this replaced spent 2.5x the bytes' streaming time): chunks
// [16t, 16t + 16) and [64 + 16t, 80 + 16t), so an mma's 16 values share one input scale; word j of
// a row gives two f16 mmas with the 32-value block scales (sa2, sb2) in the decoded weights, and
// each chunk's sums are scaled by its input scale. Two accumulator chains (FP4: one a chunk) halve
// the mmas' dependent latency. wv: the lane's chunks (row g: 0, 1; row g + 8: 2, 3); xk: the step's
// inputs of batch row 0 in shared memory (row r at xk + r · xstride), xinv_k their scales (FP8 one,
// FP4 two a step; row r at xinv_k + r · istride). acc: rows g, g + 8 at batch rows 2t, 2t + 1.
// kIntDecode (FP4): 1 decodes row g + 8 on the integer pipe and row g through conversions, so that
// the two pipes share the work; 2 both rows on the integer pipe. The same bits every way.
template <DevFormat F, int kIntDecode>
__device__ __forceinline__ void mma_step(float acc[4], const uint4* wv, uint2 sa2, uint2 sb2,
                                         float wscale, const uint16_t* xk, int xstride,
                                         const float* xinv_k, int istride, int n, int g, int t,
                                         int lo, int hi) {
  const uint32_t* wa = reinterpret_cast<const uint32_t*>(&wv[0]);
  const uint32_t* wb = reinterpret_cast<const uint32_t*>(&wv[2]);
  const bool c0_live = 2 * t < n, c1_live = 2 * t + 1 < n;
  if constexpr (F == DevFormat::FP8) {
    (void)sa2, (void)sb2;
    uint32_t xb[16] = {};
    if (g < n) {
      // The inputs of the lane's codes, in the same order (a uint4 is 8 of them).
      const uint16_t* xrow = xk + g * xstride;
      const uint4* xlo = reinterpret_cast<const uint4*>(xrow + lo);
      const uint4* xhi = reinterpret_cast<const uint4*>(xrow + hi);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint4 q = i < 2 ? xlo[i] : xhi[i - 2];
        xb[4 * i] = q.x, xb[4 * i + 1] = q.y, xb[4 * i + 2] = q.z, xb[4 * i + 3] = q.w;
      }
    }
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f}, c2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int q = 0; q < 8; ++q) {
      const uint32_t a[4] = {fp8x2_to_half2(wa[q]), fp8x2_to_half2(wb[q]),
                             fp8x2_to_half2(wa[q] >> 16), fp8x2_to_half2(wb[q] >> 16)};
      mma_f16(q % 2 ? c2 : c, a, xb[2 * q], xb[2 * q + 1]);
    }
    const float f0 = c0_live ? wscale * xinv_k[2 * t * istride] : 0.0f;
    const float f1 = c1_live ? wscale * xinv_k[(2 * t + 1) * istride] : 0.0f;
    acc[0] += (c[0] + c2[0]) * f0;
    acc[1] += (c[1] + c2[1]) * f1;
    acc[2] += (c[2] + c2[2]) * f0;
    acc[3] += (c[3] + c2[3]) * f1;
  } else {
    (void)wscale, (void)lo, (void)hi;
    // Chunk c of the lane's rows: scale byte t of word c; each chunk's mmas one chain.
    constexpr bool kIntB = kIntDecode >= 1, kIntA = kIntDecode == 2;
    uint32_t fa[2], fb[2];
    bool in_range = true;
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const uint32_t ua = ((c ? sa2.y : sa2.x) >> (8 * t)) & 0xffu;
      const uint32_t ub = ((c ? sb2.y : sb2.x) >> (8 * t)) & 0xffu;
      fa[c] = kIntA ? fp4_f16_fac_int(ua) : fp4_f16_fac(ua);
      fb[c] = kIntB ? fp4_f16_fac_int(ub) : fp4_f16_fac(ub);
      in_range = in_range && fa[c] != 0 && fb[c] != 0;
    }
    if (__all_sync(0xffffffffu, in_range)) {
      const uint4* xp = reinterpret_cast<const uint4*>(xk + g * xstride + t * 32);
      float c[2][4] = {};
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int ch = j / 4;
        uint4 xq = make_uint4(0, 0, 0, 0);
        if (g < n) xq = xp[ch * 16 + j % 4];
        uint32_t da[4], db[4];
        if constexpr (kIntA) {
          fp4_word_f16_int(wa[j], fa[ch], da);
        } else {
          fp4_word_f16(wa[j], fa[ch], da);
        }
        if constexpr (kIntB) {
          fp4_word_f16_int(wb[j], fb[ch], db);
        } else {
          fp4_word_f16(wb[j], fb[ch], db);
        }
        const uint32_t a0[4] = {da[0], db[0], da[1], db[1]};
        const uint32_t a1[4] = {da[2], db[2], da[3], db[3]};
        mma_f16(c[ch], a0, xq.x, xq.y);
        mma_f16(c[ch], a1, xq.z, xq.w);
      }
      const float* xi0 = xinv_k + 2 * t * istride;
      const float f00 = c0_live ? xi0[0] : 0.0f, f01 = c0_live ? xi0[1] : 0.0f;
      const float f10 = c1_live ? xi0[istride] : 0.0f, f11 = c1_live ? xi0[istride + 1] : 0.0f;
      acc[0] += c[0][0] * f00 + c[1][0] * f01;
      acc[1] += c[0][1] * f10 + c[1][1] * f11;
      acc[2] += c[0][2] * f00 + c[1][2] * f01;
      acc[3] += c[0][3] * f10 + c[1][3] * f11;
    } else {  // one input row (the experts' launches): column 0 is lane (g, 0)'s
      const float2 v = fp4_step_exact(wv[0], wv[1], wv[2], wv[3], sa2, sb2, xk, xinv_k, t);
      if (t == 0) acc[0] += v.x, acc[2] += v.y;
    }
  }
}

}  // namespace deepinfer::cuda::mma
