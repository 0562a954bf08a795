// bf16 mma.sync building blocks shared by the tensor-core attention (attention_tc.cu) and the
// tensor-core indexer (indexer_tc.cu): m16n8k16 with fp32 accumulators, fragment loads from
// shared-memory tiles, and the hi + lo split of fp32 operands.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace deepinfer::cuda {

// x = hi + lo with hi = bf16(x) and lo = bf16(x − hi).
__device__ inline void split(float x, __nv_bfloat16& hi, __nv_bfloat16& lo) {
  hi = __float2bfloat16_rn(x);
  lo = __float2bfloat16_rn(x - __bfloat162float(hi));
}

// c += a · b, m16n8k16, bf16 inputs, fp32 accumulators.
__device__ inline void mma(float c[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// The A fragment (16 × 16, row-major in shared memory with row stride ld) at (m0, k0), and the
// B fragment (16 × 8) stored as [n][k] at (n0, k0); g = lane / 4, t = lane % 4.
__device__ inline void load_a(uint32_t a[4], const __nv_bfloat16* s, int ld, int m0, int k0) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const __nv_bfloat16* p = s + (m0 + g) * ld + k0 + 2 * t;
  a[0] = *reinterpret_cast<const uint32_t*>(p);
  a[1] = *reinterpret_cast<const uint32_t*>(p + 8 * ld);
  a[2] = *reinterpret_cast<const uint32_t*>(p + 8);
  a[3] = *reinterpret_cast<const uint32_t*>(p + 8 * ld + 8);
}
__device__ inline void load_b(uint32_t b[2], const __nv_bfloat16* s, int ld, int n0, int k0) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const __nv_bfloat16* p = s + (n0 + g) * ld + k0 + 2 * t;
  b[0] = *reinterpret_cast<const uint32_t*>(p);
  b[1] = *reinterpret_cast<const uint32_t*>(p + 8);
}

// The B fragment (16 × 8) at (k0, n0) of a tile stored row-major as [k][n] (row stride ld, a
// multiple of 8; n0 a multiple of 8): ldmatrix .trans of its two 8 × 8 halves, lanes 0–15 giving
// the addresses of rows k0 … k0 + 15.
__device__ inline void load_b_trans(uint32_t b[2], const __nv_bfloat16* s, int ld, int k0, int n0) {
  const int lane = threadIdx.x % 32;
  const __nv_bfloat16* p = s + (k0 + lane % 16) * ld + n0;
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(b[0]), "=r"(b[1])
               : "r"(addr));
}

// Stores four consecutive values of row `row`, column c of a bf16 tile (hi, and lo when split).
__device__ inline void store4(__nv_bfloat16* hi, __nv_bfloat16* lo, int ld, int row, int c,
                              float4 v, bool exact_hi, bool want_lo) {
  const float x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __nv_bfloat16 h, l;
    if (exact_hi) {
      h = __float2bfloat16_rn(x[i]);
      l = __float2bfloat16_rn(0.0f);
    } else {
      split(x[i], h, l);
    }
    hi[row * ld + c + i] = h;
    if (want_lo) lo[row * ld + c + i] = l;
  }
}

// acc += Q · Kᵀ for a 64 × 64 tile over D dims (D a multiple of 64), a block of 128 threads (warp
// w owns rows 16w … 16w + 15 of Q, acc[nt] its columns 8nt … 8nt + 7): Q rows at q + row · D,
// the 64 key rows at keys[j] (null: zeros), staged a 64-dim chunk at a time into the bf16 tiles
// qh / kh (64 × kQkLd each) — with kSplit, fp32 values as hi + lo (ql / kl) and three products.
constexpr int kQkChunk = 64, kQkLd = kQkChunk + 8;  // row stride: conflict-free fragment loads
template <bool kSplit>
__device__ void qk_tile_product(const float* q, const float* const* keys, int D, __nv_bfloat16* qh,
                                __nv_bfloat16* ql, __nv_bfloat16* kh, __nv_bfloat16* kl,
                                float (&acc)[8][4]) {
  const int tid = threadIdx.x, warp = tid / 32;
  for (int d0 = 0; d0 < D; d0 += kQkChunk) {
    for (int i = tid; i < 64 * kQkChunk / 4; i += 128) {
      const int row = i / (kQkChunk / 4), c = i % (kQkChunk / 4) * 4;
      const float4 qv = *reinterpret_cast<const float4*>(q + row * D + d0 + c);
      store4(qh, ql, kQkLd, row, c, qv, !kSplit, kSplit);
      const float* k = keys[row];
      const float4 kv = k ? *reinterpret_cast<const float4*>(k + d0 + c) : float4{0, 0, 0, 0};
      store4(kh, kl, kQkLd, row, c, kv, !kSplit, kSplit);
    }
    __syncthreads();
#pragma unroll
    for (int k0 = 0; k0 < kQkChunk; k0 += 16) {
      uint32_t ah[4], al[4];
      load_a(ah, qh, kQkLd, warp * 16, k0);
      if (kSplit) load_a(al, ql, kQkLd, warp * 16, k0);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        uint32_t bh[2];
        load_b(bh, kh, kQkLd, nt * 8, k0);
        mma(acc[nt], ah, bh);
        if (kSplit) {
          uint32_t bl[2];
          load_b(bl, kl, kQkLd, nt * 8, k0);
          mma(acc[nt], ah, bl);
          mma(acc[nt], al, bh);
        }
      }
    }
    __syncthreads();
  }
}

}  // namespace deepinfer::cuda
