// Tensor-core attention for prefill chunks and decode batches (attention_tc.cuh). The 64 heads of a
// row share its keys (window ∪ compressed), so the logits of a row are a 64 × S product and P·V a
// 64 × D one: both run as bf16 mma.sync tiles with fp32 accumulation. Three kernels, the
// probabilities going through the `probs` scratch in the reference body's layout ([row, head,
// slot]):
//   1. logits: a block per (row, 64 heads, 64 slots), Q · Kᵀ over D in chunks of 64;
//   2. softmax: a warp per (row, head), the reference's two rules (Exact: one softmax with the
//      sink; official: the 64-slot tiles of its slot order, bf16 probabilities, rescaled by the
//      later tiles' maxima);
//   3. P·V: a block per (row, 64 heads, 128 dims), slots in steps of 32.
// Decode-sized launches (≤ DEEPINFER_CUDA_ATTN_TC_DECODE_ROWS rows) take variants of 1 and 3 on
// more, smaller blocks (32 slots, 32 dims) with the next chunk's loads in flight during the current
// chunk's products; each output element gets the same mma sequence as above, so the results are
// the same bits and a row's result still does not depend on the launch's row count.
// Rounding: official q and keys are bf16-exact (the reference rounds them), so their products are
// exact and only the summation order differs; fp32 values (exact q/keys, every probability) are
// split into bf16 hi + lo and multiplied as hi·hi + hi·lo + lo·hi (≈ 16 significand bits).
#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdlib>

#include "backend/cuda/attention_tc.cuh"
#include "backend/cuda/cuda_model.h"
#include "backend/cuda/formats.cuh"
#include "backend/cuda/mma_bf16.cuh"
#include "backend/cuda/row_reduce.cuh"

namespace deepinfer::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kHeads = 64;     // heads per block: four 16-row mma tiles
constexpr int kSlotTile = 64;  // slots per logits block, = the official softmax's tile
constexpr int kPvSlots = 32;   // slots per P·V step
constexpr int kPvDims = 128;   // output dims per P·V block
constexpr int kLdPV = kPvSlots + 8;
constexpr int kMaxTiles = 128;  // official softmax tiles per row (S ≤ 8192)

bool g_attention_tc = env_switch("DEEPINFER_CUDA_ATTN_TC", true);
// Below this many rows the per-(row, head) kernel takes the launch
// (DEEPINFER_CUDA_ATTN_TC_MIN_ROWS; default 1: every launch here). That kernel reads a row's keys
// once per head: H200, V4-Flash decode at 4,096 positions, CSA official 0.071 ms here vs 0.092 at 1
// row, 0.073 vs 0.148 at 4, 0.157 vs 0.511 at 16 (HCA at 1 row 0.044 vs 0.039).
int g_min_rows = [] {
  const char* v = std::getenv("DEEPINFER_CUDA_ATTN_TC_MIN_ROWS");
  return v && *v ? std::max(1, std::atoi(v)) : 1;
}();

// The decode variants (DEEPINFER_CUDA_ATTN_TC_DECODE=0: the kernels above at every row count) and
// the most rows a launch may have to take them (DEEPINFER_CUDA_ATTN_TC_DECODE_ROWS, default 16:
// at 64 rows they lose, 0.207 vs 0.122 ms CSA official on the H200, each of their blocks
// re-reading a row's q or probabilities from L2).
bool g_decode = env_switch("DEEPINFER_CUDA_ATTN_TC_DECODE", true);
int g_decode_rows = [] {
  const char* v = std::getenv("DEEPINFER_CUDA_ATTN_TC_DECODE_ROWS");
  return v && *v ? std::max(0, std::atoi(v)) : 16;
}();
// The most blocks (a cluster) a decode P·V launch splits a row's slots over, 64 slots or more
// each (DEEPINFER_CUDA_ATTN_PV_SPLIT; 0 or 1: unsplit). Not in batch-invariant mode: the split
// changes the sums' order, so a decode row would no longer give a prefill row's bits.
int g_pv_split = [] {
  const char* v = std::getenv("DEEPINFER_CUDA_ATTN_PV_SPLIT");
  return v && *v ? std::clamp(std::atoi(v), 0, 8) : 0;
}();
// The decode variants' register softmax (decode_softmax_kernel, the same bits), with
// DEEPINFER_CUDA_ATTN_DECODE_SOFTMAX=1 (off until measured: softmax_kernel there too).
bool g_decode_softmax = env_switch("DEEPINFER_CUDA_ATTN_DECODE_SOFTMAX", false);
constexpr int kDecSlotTile = 32;          // slots per decode logits block
constexpr int kDecPvDims = 32;            // output dims per decode P·V block
constexpr int kDecPvSlots = 64;           // slots per decode P·V step
constexpr int kDecMaxSlots = 1024;        // decode P·V: every key address in shared memory
constexpr int kDecLdP = kDecPvSlots + 8;  // 144-byte rows: conflict-free A fragments
constexpr int kDecLdV =
    kDecPvDims + 8;  // 80-byte rows: the eight rows of an ldmatrix hit all banks

// 1. logits[r, h, s] = (q[r, h] · key(r, s)) · scale, −inf for a slot without a key.
// Grid: (row, head group) × slot tiles; 4 warps, warp w owns heads 16w … 16w + 15 of the group.
template <bool kSplit>
__global__ void __launch_bounds__(128)
    logits_kernel(const Rows rw, const AttnArgs a, int S, int groups, float* __restrict__ probs) {
  pdl_begin();
  __shared__ __align__(16) __nv_bfloat16 qh[kHeads * kQkLd], kh[kSlotTile * kQkLd];
  __shared__ __align__(16) __nv_bfloat16 ql[kSplit ? kHeads * kQkLd : 1];
  __shared__ __align__(16) __nv_bfloat16 kl[kSplit ? kSlotTile * kQkLd : 1];
  __shared__ const float* keys[kSlotTile];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t r = blockIdx.x / groups;
  const int h0 = static_cast<int>(blockIdx.x % groups) * kHeads;
  const int s0 = static_cast<int>(blockIdx.y) * kSlotTile;
  if (tid < kSlotTile) keys[tid] = s0 + tid < S ? attn_key_at(rw, a, r, s0 + tid) : nullptr;
  const int any = __syncthreads_or(tid < kSlotTile && keys[tid] != nullptr);
  float* out = probs + (r * a.H + h0) * S;
  if (!any) {  // no key in this tile (a short CSA selection, HCA past the visible entries)
    for (int i = tid; i < kHeads * kSlotTile; i += 128) {
      const int s = s0 + i % kSlotTile;
      if (s < S) out[static_cast<int64_t>(i / kSlotTile) * S + s] = -INFINITY;
    }
    return;
  }
  const int D = a.D;
  const float* q = a.q + (r * a.H + h0) * D;
  float acc[8][4] = {};
  qk_tile_product<kSplit>(q, keys, D, qh, ql, kh, kl, acc);
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int head = warp * 16 + g + (i >= 2 ? 8 : 0), j = nt * 8 + 2 * t + (i & 1);
      if (s0 + j < S)
        out[static_cast<int64_t>(head) * S + s0 + j] = keys[j] ? acc[nt][i] * a.scale : -INFINITY;
    }
  }
}

// 1'. The logits of a decode-sized launch: a block per (row, 64 heads, 32 slots), 4 warps of 16
// heads × 32 slots. The same fragments and mma order per element as logits_kernel (same bits);
// a chunk's q and key values are loaded into registers, all at once, two chunks ahead of the
// products.
template <bool kSplit>
__global__ void __launch_bounds__(128) decode_logits_kernel(const Rows rw, const AttnArgs a, int S,
                                                            int groups, float* __restrict__ probs) {
  pdl_begin();
  constexpr int kQ = kHeads * kQkChunk / 4 / 128;        // float4 of q a thread per chunk
  constexpr int kK = kDecSlotTile * kQkChunk / 4 / 128;  // float4 of keys a thread per chunk
  __shared__ __align__(16) __nv_bfloat16 qh[kHeads * kQkLd], kh[kDecSlotTile * kQkLd];
  __shared__ __align__(16) __nv_bfloat16 ql[kSplit ? kHeads * kQkLd : 8];
  __shared__ __align__(16) __nv_bfloat16 kl[kSplit ? kDecSlotTile * kQkLd : 8];
  __shared__ const float* keys[kDecSlotTile];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t r = blockIdx.x / groups;
  const int h0 = static_cast<int>(blockIdx.x % groups) * kHeads;
  const int s0 = static_cast<int>(blockIdx.y) * kDecSlotTile;
  if (tid < kDecSlotTile) keys[tid] = s0 + tid < S ? attn_key_at(rw, a, r, s0 + tid) : nullptr;
  const int any = __syncthreads_or(tid < kDecSlotTile && keys[tid] != nullptr);
  float* out = probs + (r * a.H + h0) * S;
  if (!any) {
    for (int i = tid; i < kHeads * kDecSlotTile; i += 128) {
      const int s = s0 + i % kDecSlotTile;
      if (s < S) out[static_cast<int64_t>(i / kDecSlotTile) * S + s] = -INFINITY;
    }
    return;
  }
  const int D = a.D;
  const float* q = a.q + (r * a.H + h0) * D;
  constexpr int kRow = kQkChunk / 4;  // float4 per chunk row
  using QRegs = float4[kQ];
  using KRegs = float4[kK];
  auto fetch = [&](int d0, QRegs& qn, KRegs& kn) {
#pragma unroll
    for (int u = 0; u < kQ; ++u) {
      const int i = tid + u * 128;
      qn[u] = *reinterpret_cast<const float4*>(q + (i / kRow) * D + d0 + i % kRow * 4);
    }
#pragma unroll
    for (int u = 0; u < kK; ++u) {
      const int i = tid + u * 128;
      const float* k = keys[i / kRow];
      kn[u] = k ? *reinterpret_cast<const float4*>(k + d0 + i % kRow * 4) : float4{0, 0, 0, 0};
    }
  };
  float acc[kDecSlotTile / 8][4] = {};
  // Stages chunk d0 (held in qn / kn), refills them with chunk d0 + 2 · 64, then multiplies.
  auto chunk = [&](int d0, QRegs& qn, KRegs& kn) {
#pragma unroll
    for (int u = 0; u < kQ; ++u) {
      const int i = tid + u * 128;
      store4(qh, ql, kQkLd, i / kRow, i % kRow * 4, qn[u], !kSplit, kSplit);
    }
#pragma unroll
    for (int u = 0; u < kK; ++u) {
      const int i = tid + u * 128;
      store4(kh, kl, kQkLd, i / kRow, i % kRow * 4, kn[u], !kSplit, kSplit);
    }
    __syncthreads();
    if (d0 + 2 * kQkChunk < D) fetch(d0 + 2 * kQkChunk, qn, kn);  // two chunks in flight
#pragma unroll
    for (int k0 = 0; k0 < kQkChunk; k0 += 16) {
      uint32_t ah[4], al[4];
      load_a(ah, qh, kQkLd, warp * 16, k0);
      if (kSplit) load_a(al, ql, kQkLd, warp * 16, k0);
#pragma unroll
      for (int nt = 0; nt < kDecSlotTile / 8; ++nt) {
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
  };
  QRegs qa, qb;
  KRegs ka, kb;
  fetch(0, qa, ka);
  if (kQkChunk < D) fetch(kQkChunk, qb, kb);
  for (int d0 = 0; d0 < D; d0 += 2 * kQkChunk) {
    chunk(d0, qa, ka);
    if (d0 + kQkChunk < D) chunk(d0 + kQkChunk, qb, kb);
  }
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int nt = 0; nt < kDecSlotTile / 8; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int head = warp * 16 + g + (i >= 2 ? 8 : 0), j = nt * 8 + 2 * t + (i & 1);
      if (s0 + j < S)
        out[static_cast<int64_t>(head) * S + s0 + j] = keys[j] ? acc[nt][i] * a.scale : -INFINITY;
    }
  }
}

__device__ inline float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// 2. The softmax of one (row, head) per warp, in place over its logits; slots without a key get
// weight 0. Official: the reference's tiles over its slot order (OfficialSlots), each tile's
// probabilities bf16(exp(l − running max)) times the later tiles' rescales over the denominator.
constexpr int kSoftmaxWarps = 8;

__global__ void __launch_bounds__(kSoftmaxWarps * 32)
    softmax_kernel(const Rows rw, const AttnArgs a, int S, float* __restrict__ probs) {
  pdl_begin();
  __shared__ float rescale_all[kSoftmaxWarps][kMaxTiles];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t rh = static_cast<int64_t>(blockIdx.x) * kSoftmaxWarps + warp;
  if (rh >= rw.n * a.H) return;
  const int64_t r = rh / a.H;
  const int h = static_cast<int>(rh % a.H);
  float* pr = probs + rh * S;
  const float sink = a.sink[h];
  if (!a.official) {
    float m = sink;
    for (int s = lane; s < S; s += 32) m = fmaxf(m, pr[s]);
    m = warp_max(m);
    float sum = 0.0f;
    for (int s = lane; s < S; s += 32) {
      const float ex = pr[s] == -INFINITY ? 0.0f : expf(pr[s] - m);
      pr[s] = ex;
      sum += ex;
    }
    const float inv = 1.0f / (warp_sum(sum) + expf(sink - m));
    for (int s = lane; s < S; s += 32) pr[s] *= inv;
    return;
  }
  float* rescale = rescale_all[warp];
  const OfficialSlots order = official_slots(rw, a, r);
  const int64_t n_slots = order.n_slots;
  const int n_tiles = static_cast<int>((n_slots + kSlotTile - 1) / kSlotTile);
  float run_max = -INFINITY, denom = 0.0f;
  for (int T = 0; T < n_tiles; ++T) {
    int s[2];
    float l[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int64_t t = int64_t{T} * kSlotTile + u * 32 + lane;
      s[u] = t < n_slots ? order.slot(t) : -1;
      l[u] = s[u] >= 0 ? pr[s[u]] : -INFINITY;
    }
    if (!__any_sync(0xffffffffu, s[0] >= 0 || s[1] >= 0)) {
      if (lane == 0) rescale[T] = 1.0f;
      continue;
    }
    const float new_max = fmaxf(run_max, warp_max(fmaxf(l[0], l[1])));
    const float resc = expf(run_max - new_max);
    float part = 0.0f;
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if (s[u] < 0) continue;
      const float ex = expf(l[u] - new_max);
      part += ex;
      pr[s[u]] = bf16r(ex);  // the tile's probability before the later rescales
    }
    denom = denom * resc + warp_sum(part);
    run_max = new_max;
    if (lane == 0) rescale[T] = resc;
  }
  denom += expf(sink - run_max);
  __syncwarp();
  float f = 1.0f / denom;
  for (int T = n_tiles - 1; T >= 0; --T) {
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int64_t t = int64_t{T} * kSlotTile + u * 32 + lane;
      const int sl = t < n_slots ? order.slot(t) : -1;
      if (sl >= 0) pr[sl] *= f;
    }
    f *= rescale[T];
  }
  __syncwarp();
  for (int sl = lane; sl < S; sl += 32) {
    if (pr[sl] == -INFINITY) pr[sl] = 0.0f;
  }
}

// 2'. The softmax of a decode-sized launch (S ≤ kDecMaxSlots): softmax_kernel's lanes, operations
// and order (the same bits), but every logit a warp needs read into registers in one round trip
// instead of one per 64-slot tile, the tiles' maxima and sums reduced independently of each other
// (only the running maximum and the denominator run tile after tile, in registers) and each weight
// written once.
constexpr int kDecTiles = kDecMaxSlots / kSlotTile;  // official tiles
constexpr int kDecLaneSlots = kDecMaxSlots / 32;     // slots a lane holds

__global__ void __launch_bounds__(kSoftmaxWarps * 32)
    decode_softmax_kernel(const Rows rw, const AttnArgs a, int S, float* __restrict__ probs) {
  pdl_begin();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t rh = static_cast<int64_t>(blockIdx.x) * kSoftmaxWarps + warp;
  if (rh >= rw.n * a.H) return;
  const int64_t r = rh / a.H;
  const int h = static_cast<int>(rh % a.H);
  float* pr = probs + rh * S;
  const float sink = a.sink[h];
  if (!a.official) {
    float l[kDecLaneSlots];
    float m = sink;
#pragma unroll
    for (int k = 0; k < kDecLaneSlots; ++k) {
      const int s = lane + 32 * k;
      l[k] = s < S ? pr[s] : -INFINITY;
      if (s < S) m = fmaxf(m, l[k]);
    }
    m = warp_max(m);
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kDecLaneSlots; ++k) {
      if (lane + 32 * k >= S) continue;
      l[k] = l[k] == -INFINITY ? 0.0f : expf(l[k] - m);
      sum += l[k];
    }
    const float inv = 1.0f / (warp_sum(sum) + expf(sink - m));
#pragma unroll
    for (int k = 0; k < kDecLaneSlots; ++k) {
      if (lane + 32 * k < S) pr[lane + 32 * k] = l[k] * inv;
    }
    return;
  }
  const OfficialSlots order = official_slots(rw, a, r);
  const int64_t n_slots = order.n_slots;
  const int n_tiles = static_cast<int>((n_slots + kSlotTile - 1) / kSlotTile);
  // Order position t of slot s, or -1 (slot() inverted): which slots keep their logit until the
  // last pass turns a missing key's -inf into 0.
  auto rank_of = [&](int64_t s) -> int64_t {
    if (s < order.W) {
      const int64_t t = s - order.first + order.p - order.W + 1;
      return t >= 0 && t < order.n_window && t < order.window_slots ? t : -1;
    }
    const int64_t t = s - order.W + order.window_slots;
    return t < n_slots ? t : -1;
  };
  uint32_t missing = 0;  // bit k: slot lane + 32 k is outside the order and has no key
  int sl[kDecTiles][2];
  float l[kDecTiles][2];
#pragma unroll
  for (int k = 0; k < kDecLaneSlots; ++k) {
    const int s = lane + 32 * k;
    if (s < S && rank_of(s) < 0 && pr[s] == -INFINITY) missing |= 1u << k;
  }
#pragma unroll
  for (int T = 0; T < kDecTiles; ++T) {
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int64_t t = int64_t{T} * kSlotTile + u * 32 + lane;
      sl[T][u] = T < n_tiles && t < n_slots ? order.slot(t) : -1;
      l[T][u] = sl[T][u] >= 0 ? pr[sl[T][u]] : -INFINITY;
    }
  }
  uint32_t any = 0;  // bit T: the tile has a slot
  float run_max = -INFINITY, denom = 0.0f, resc[kDecTiles], tile_max[kDecTiles];
#pragma unroll
  for (int T = 0; T < kDecTiles; ++T) {
    if (__any_sync(0xffffffffu, sl[T][0] >= 0 || sl[T][1] >= 0)) any |= 1u << T;
    tile_max[T] = warp_max(fmaxf(l[T][0], l[T][1]));
  }
#pragma unroll
  for (int T = 0; T < kDecTiles; ++T) {  // tile_max becomes the running maximum after tile T
    resc[T] = 1.0f;
    if (!(any >> T & 1)) continue;
    const float new_max = fmaxf(run_max, tile_max[T]);
    resc[T] = expf(run_max - new_max);
    tile_max[T] = run_max = new_max;
  }
  float psum[kDecTiles];
#pragma unroll
  for (int T = 0; T < kDecTiles; ++T) {
    float part = 0.0f;
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if (sl[T][u] < 0) continue;
      const float ex = expf(l[T][u] - tile_max[T]);
      part += ex;
      l[T][u] = bf16r(ex);  // the tile's probability before the later rescales
    }
    psum[T] = warp_sum(part);
  }
#pragma unroll
  for (int T = 0; T < kDecTiles; ++T) {
    if (any >> T & 1) denom = denom * resc[T] + psum[T];
  }
  denom += expf(sink - run_max);
  float f = 1.0f / denom;
#pragma unroll
  for (int T = kDecTiles - 1; T >= 0; --T) {
    if (T >= n_tiles) continue;
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if (sl[T][u] >= 0) pr[sl[T][u]] = l[T][u] * f;
    }
    f *= resc[T];
  }
#pragma unroll
  for (int k = 0; k < kDecLaneSlots; ++k) {
    if (missing >> k & 1) pr[lane + 32 * k] = 0.0f;
  }
}

// 3. o[r, h, d] = Σ_s p[r, h, s] · key(r, s)[d]. Grid: (row, head group) × D / 128; 8 warps, warp
// w owns heads 16 (w % 4) … + 15 and dims 64 (w / 4) … + 63 of the block's 128.
// Software-pipelined: step s + 1's probabilities and values are read into registers while step
// s's tiles multiply; V is staged row-major ([slot][dim], coalesced 16-byte reads) and its B
// fragments taken by ldmatrix .trans (H200: 0.73 vs 1.47 ms for a 512-row CSA chunk at 7,680
// against the transposed staging it replaced, the same bits).
constexpr int kLdV = kPvDims + 8;  // 272-byte rows: the eight rows of an ldmatrix hit all banks

template <bool kSplitV>
__global__ void __launch_bounds__(256, 2)
    pv_kernel(const Rows rw, const AttnArgs a, int S, int groups, const float* __restrict__ probs,
              float* __restrict__ o) {
  pdl_begin();
  constexpr int kP = kHeads * kPvSlots / 256;       // probabilities a thread per step
  constexpr int kV = kPvSlots * kPvDims / 4 / 256;  // float4 of values a thread per step
  __shared__ __align__(16) __nv_bfloat16 ph[kHeads * kLdPV], pl[kHeads * kLdPV];
  __shared__ __align__(16) __nv_bfloat16 vh[kPvSlots * kLdV];
  __shared__ __align__(16) __nv_bfloat16 vl[kSplitV ? kPvSlots * kLdV : 8];
  __shared__ const float* keys[2][kPvSlots];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t r = blockIdx.x / groups;
  const int h0 = static_cast<int>(blockIdx.x % groups) * kHeads;
  const int c0 = static_cast<int>(blockIdx.y) * kPvDims;
  const int mt = warp % 4, nh = warp / 4;
  const float* pr = probs + (r * a.H + h0) * S;
  float pn[kP];
  float4 vn[kV];
  auto key_rows = [&](int s0, int buf) {
    if (tid < kPvSlots) keys[buf][tid] = s0 + tid < S ? attn_key_at(rw, a, r, s0 + tid) : nullptr;
  };
  auto fetch = [&](int s0, int buf) {
#pragma unroll
    for (int u = 0; u < kP; ++u) {
      const int i = tid + u * 256, row = i / kPvSlots, j = i % kPvSlots;
      pn[u] = s0 + j < S && keys[buf][j] ? pr[static_cast<int64_t>(row) * S + s0 + j] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kV; ++u) {
      const int i = tid + u * 256, j = i / (kPvDims / 4), c = i % (kPvDims / 4) * 4;
      const float* k = keys[buf][j];
      vn[u] = k ? *reinterpret_cast<const float4*>(k + c0 + c) : float4{0, 0, 0, 0};
    }
  };
  key_rows(0, 0);
  __syncthreads();
  fetch(0, 0);
  float acc[8][4] = {};
  for (int s0 = 0, buf = 0; s0 < S; s0 += kPvSlots, buf ^= 1) {
#pragma unroll
    for (int u = 0; u < kP; ++u) {
      const int i = tid + u * 256, row = i / kPvSlots, j = i % kPvSlots;
      split(pn[u], ph[row * kLdPV + j], pl[row * kLdPV + j]);
    }
#pragma unroll
    for (int u = 0; u < kV; ++u) {
      const int i = tid + u * 256, j = i / (kPvDims / 4), c = i % (kPvDims / 4) * 4;
      store4(vh, vl, kLdV, j, c, vn[u], !kSplitV, kSplitV);
    }
    const bool more = s0 + kPvSlots < S;
    if (more) key_rows(s0 + kPvSlots, buf ^ 1);
    __syncthreads();
    if (more) fetch(s0 + kPvSlots, buf ^ 1);  // in flight during the products below
#pragma unroll
    for (int k0 = 0; k0 < kPvSlots; k0 += 16) {
      uint32_t ah[4], al[4];
      load_a(ah, ph, kLdPV, mt * 16, k0);
      load_a(al, pl, kLdPV, mt * 16, k0);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        uint32_t bh[2];
        load_b_trans(bh, vh, kLdV, k0, nh * 64 + nt * 8);
        mma(acc[nt], ah, bh);
        mma(acc[nt], al, bh);
        if (kSplitV) {
          uint32_t bl[2];
          load_b_trans(bl, vl, kLdV, k0, nh * 64 + nt * 8);
          mma(acc[nt], ah, bl);
        }
      }
    }
    __syncthreads();
  }
  const int g = lane / 4, t = lane % 4;
  float* out = o + (r * a.H + h0) * a.D + c0 + nh * 64;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int head = mt * 16 + g + half * 8;
      float2 v{acc[nt][2 * half], acc[nt][2 * half + 1]};
      if (a.official) v = float2{bf16r(v.x), bf16r(v.y)};
      *reinterpret_cast<float2*>(out + static_cast<int64_t>(head) * a.D + nt * 8 + 2 * t) = v;
    }
  }
}

// 3'. P·V of a decode-sized launch: a block per (row, 64 heads, 32 dims), 8 warps of 16 heads ×
// 16 dims, slots in steps of 64 with the next two steps' loads in flight and every key address of
// the row resolved once up front (S ≤ kDecMaxSlots). Per element the same 16-slot mma sequence as
// pv_kernel (same bits). With gridDim.z > 1 (a cluster of z blocks, attention_tc_pv_split) block z
// takes slots [z · span, (z + 1) · span) and the cluster's partial sums are added in rank order
// through distributed shared memory: at batch 1 the unsplit launch is 16 blocks walking every slot.
template <bool kSplitV>
__global__ void __launch_bounds__(256)
    decode_pv_kernel(const Rows rw, const AttnArgs a, int S, int span, int groups,
                     const float* __restrict__ probs, float* __restrict__ o) {
  pdl_begin();
  constexpr int kP = kHeads * kDecPvSlots / 256;          // probabilities a thread per step
  constexpr int kV = kDecPvSlots * kDecPvDims / 4 / 256;  // float4 of values a thread per step
  constexpr int kRow = kDecPvDims / 4;                    // float4 per value row
  __shared__ __align__(16) __nv_bfloat16 ph[kHeads * kDecLdP], pl[kHeads * kDecLdP];
  __shared__ __align__(16) __nv_bfloat16 vh[kDecPvSlots * kDecLdV];
  __shared__ __align__(16) __nv_bfloat16 vl[kSplitV ? kDecPvSlots * kDecLdV : 8];
  __shared__ const float* keys[kDecMaxSlots];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t r = blockIdx.x / groups;
  const int h0 = static_cast<int>(blockIdx.x % groups) * kHeads;
  const int c0 = static_cast<int>(blockIdx.y) * kDecPvDims;
  const int mt = warp % 4, nh = warp / 4;
  const int lo = static_cast<int>(blockIdx.z) * span, hi = min(S, lo + span);
  for (int s = lo + tid; s < hi; s += 256) keys[s] = attn_key_at(rw, a, r, s);
  __syncthreads();
  const float* pr = probs + (r * a.H + h0) * S;
  using PRegs = float[kP];
  using VRegs = float4[kV];
  auto fetch = [&](int s0, PRegs& pn, VRegs& vn) {
#pragma unroll
    for (int u = 0; u < kP; ++u) {
      const int i = tid + u * 256, row = i / kDecPvSlots, j = i % kDecPvSlots;
      pn[u] = s0 + j < hi && keys[s0 + j] ? pr[static_cast<int64_t>(row) * S + s0 + j] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kV; ++u) {
      const int i = tid + u * 256, j = i / kRow;
      const float* k = s0 + j < hi ? keys[s0 + j] : nullptr;
      vn[u] = k ? *reinterpret_cast<const float4*>(k + c0 + i % kRow * 4) : float4{0, 0, 0, 0};
    }
  };
  float acc[2][4] = {};
  // Stages step s0 (held in pn / vn), refills them with step s0 + 2 · 64, then multiplies.
  auto step = [&](int s0, PRegs& pn, VRegs& vn) {
#pragma unroll
    for (int u = 0; u < kP; ++u) {
      const int i = tid + u * 256, row = i / kDecPvSlots, j = i % kDecPvSlots;
      split(pn[u], ph[row * kDecLdP + j], pl[row * kDecLdP + j]);
    }
#pragma unroll
    for (int u = 0; u < kV; ++u) {
      const int i = tid + u * 256;
      store4(vh, vl, kDecLdV, i / kRow, i % kRow * 4, vn[u], !kSplitV, kSplitV);
    }
    __syncthreads();
    if (s0 + 2 * kDecPvSlots < hi) fetch(s0 + 2 * kDecPvSlots, pn, vn);  // two steps in flight
#pragma unroll
    for (int k0 = 0; k0 < kDecPvSlots; k0 += 16) {
      uint32_t ah[4], al[4];
      load_a(ah, ph, kDecLdP, mt * 16, k0);
      load_a(al, pl, kDecLdP, mt * 16, k0);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        uint32_t bh[2];
        load_b_trans(bh, vh, kDecLdV, k0, nh * 16 + nt * 8);
        mma(acc[nt], ah, bh);
        mma(acc[nt], al, bh);
        if (kSplitV) {
          uint32_t bl[2];
          load_b_trans(bl, vl, kDecLdV, k0, nh * 16 + nt * 8);
          mma(acc[nt], ah, bl);
        }
      }
    }
    __syncthreads();
  };
  PRegs pa, pb;
  VRegs va, vb;
  fetch(lo, pa, va);
  if (lo + kDecPvSlots < hi) fetch(lo + kDecPvSlots, pb, vb);
  for (int s0 = lo; s0 < hi; s0 += 2 * kDecPvSlots) {
    step(s0, pa, va);
    if (s0 + kDecPvSlots < hi) step(s0 + kDecPvSlots, pb, vb);
  }
  const int g = lane / 4, t = lane % 4;
  if (gridDim.z > 1) {
    // The block's sums [64 heads][32 dims] in its (now idle) probability tiles; rank q then adds
    // every rank's value of its share of the outputs, rank 0 first.
    float* part = reinterpret_cast<float*>(ph);
    static_assert(sizeof(ph) >= kHeads * kDecPvDims * sizeof(float), "the partial sums fit");
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int head = mt * 16 + g + (i >= 2 ? 8 : 0), c = nh * 16 + nt * 8 + 2 * t + (i & 1);
        part[head * kDecPvDims + c] = acc[nt][i];
      }
    }
    cg::cluster_group cluster = cg::this_cluster();
    const unsigned rank = cluster.block_rank(), parts = cluster.num_blocks();
    cluster.sync();  // every rank's sums written and visible
    for (int i = static_cast<int>(rank) * 256 + tid; i < kHeads * kDecPvDims;
         i += static_cast<int>(parts) * 256) {
      float v = 0.0f;
      for (unsigned q = 0; q < parts; ++q) v += cluster.map_shared_rank(part, q)[i];
      const int head = i / kDecPvDims, c = i % kDecPvDims;
      o[(r * a.H + h0 + head) * a.D + c0 + c] = a.official ? bf16r(v) : v;
    }
    cluster.sync();  // the other ranks' shared memory stays until every rank has read it
    return;
  }
  float* out = o + (r * a.H + h0) * a.D + c0 + nh * 16;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int head = mt * 16 + g + half * 8;
      float2 v{acc[nt][2 * half], acc[nt][2 * half + 1]};
      if (a.official) v = float2{bf16r(v.x), bf16r(v.y)};
      *reinterpret_cast<float2*>(out + static_cast<int64_t>(head) * a.D + nt * 8 + 2 * t) = v;
    }
  }
}

}  // namespace

bool attention_tc() { return g_attention_tc; }
void set_attention_tc(bool on) { g_attention_tc = on; }
int attention_tc_min_rows() { return g_min_rows; }
void set_attention_tc_min_rows(int rows) { g_min_rows = std::max(1, rows); }

bool attention_tc_supported(const AttnArgs& a, int64_t rows) {
  const int64_t S = a.W + a.cslots();
  // A row's result does not depend on the other rows of the launch, so batch-invariant mode takes
  // it at every row count (never by the batch's size).
  return (rows >= g_min_rows || batch_invariant()) && a.H % kHeads == 0 && a.D % kPvDims == 0 &&
         S > 0 && S <= int64_t{kSlotTile} * kMaxTiles && aligned16(a.q) && aligned16(a.kv) &&
         aligned16(a.ring) && aligned16(a.cmp);
}

bool attention_tc_decode() { return g_decode; }
void set_attention_tc_decode(bool on) { g_decode = on; }
int attention_tc_decode_rows() { return g_decode_rows; }
void set_attention_tc_decode_rows(int rows) { g_decode_rows = std::max(0, rows); }
bool attention_tc_decode_softmax() { return g_decode_softmax; }
void set_attention_tc_decode_softmax(bool on) { g_decode_softmax = on; }
int attention_tc_pv_split() { return g_pv_split; }
void set_attention_tc_pv_split(int parts) { g_pv_split = std::clamp(parts, 0, 8); }

void attention_tc_run(Exec& e, const Rows& rows, const AttnArgs& a, float* probs, float* o) {
  if (rows.n <= 0) return;
  const int S = a.W + a.cslots();
  const int groups = a.H / kHeads;
  const unsigned row_groups = static_cast<unsigned>(rows.n * groups);
  // By row count and shapes only; either way the same bits (the variants' comments).
  const bool decode = g_decode && S <= kDecMaxSlots && rows.n <= g_decode_rows;
  const int tile = decode ? kDecSlotTile : kSlotTile;
  const dim3 lg(row_groups, static_cast<unsigned>((S + tile - 1) / tile));
  if (decode) {
    if (a.official) {
      e.launch(decode_logits_kernel<false>, lg, 128, 0, rows, a, S, groups, probs);
    } else {
      e.launch(decode_logits_kernel<true>, lg, 128, 0, rows, a, S, groups, probs);
    }
  } else if (a.official) {
    e.launch(logits_kernel<false>, lg, 128, 0, rows, a, S, groups, probs);
  } else {
    e.launch(logits_kernel<true>, lg, 128, 0, rows, a, S, groups, probs);
  }
  e.note(cudaGetLastError());
  const int64_t pairs = rows.n * a.H;
  const unsigned sg = static_cast<unsigned>((pairs + kSoftmaxWarps - 1) / kSoftmaxWarps);
  if (decode && g_decode_softmax) {
    e.launch(decode_softmax_kernel, sg, kSoftmaxWarps * 32, 0, rows, a, S, probs);
  } else {
    e.launch(softmax_kernel, sg, kSoftmaxWarps * 32, 0, rows, a, S, probs);
  }
  e.note(cudaGetLastError());
  if (decode) {
    // Split: the 64-slot steps shared out evenly over at most g_pv_split ranks, none empty.
    const int steps = (S + kDecPvSlots - 1) / kDecPvSlots;
    const int max_parts = batch_invariant() ? 1 : std::max(1, g_pv_split);
    const int per_part = (steps + max_parts - 1) / max_parts;
    const int parts = (steps + per_part - 1) / per_part, span = per_part * kDecPvSlots;
    const dim3 pg(row_groups, static_cast<unsigned>(a.D / kDecPvDims),
                  static_cast<unsigned>(parts));
    auto kernel = a.official ? decode_pv_kernel<false> : decode_pv_kernel<true>;
    if (parts > 1) {
      e.launch_cluster(kernel, pg, dim3(256), 0, dim3(1, 1, static_cast<unsigned>(parts)), rows, a,
                       S, span, groups, probs, o);
    } else {
      e.launch(kernel, pg, 256, 0, rows, a, S, span, groups, probs, o);
    }
  } else {
    const dim3 pg(row_groups, static_cast<unsigned>(a.D / kPvDims));
    if (a.official) {
      e.launch(pv_kernel<false>, pg, 256, 0, rows, a, S, groups, probs, o);
    } else {
      e.launch(pv_kernel<true>, pg, 256, 0, rows, a, S, groups, probs, o);
    }
  }
  e.note(cudaGetLastError());
}

}  // namespace deepinfer::cuda
