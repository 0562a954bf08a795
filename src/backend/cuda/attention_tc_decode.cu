// The decode-sized attention kernels (attention_tc_decode.cuh): the prefill kernels of
// attention_tc.cu on more, smaller blocks, with their global loads issued all at once into
// registers ahead of the products (the prefill kernels' loads were a chain of dependent round trips
// on 2–10 blocks at one row).
#include <cuda_bf16.h>

#include <cstdlib>

#include "backend/cuda/attention_tc.cuh"
#include "backend/cuda/attention_tc_decode.cuh"
#include "backend/cuda/cuda_model.h"
#include "backend/cuda/formats.cuh"
#include "backend/cuda/mma_bf16.cuh"
#include "backend/cuda/row_reduce.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kSlotTile = 64;             // the official softmax's tile (the reference's)
constexpr int kSoftmaxWarps = 8;          // softmax (row, head) pairs a block
constexpr int kDecSlotTile = 32;          // slots per logits block
constexpr int kDecPvDims = 32;            // output dims per P·V block
constexpr int kDecPvSlots = 64;           // slots per P·V step
constexpr int kDecLdP = kDecPvSlots + 8;  // 144-byte rows: conflict-free A fragments
constexpr int kDecLdV =
    kDecPvDims + 8;  // 80-byte rows: the eight rows of an ldmatrix hit all banks
constexpr int pv_threads(int heads) { return heads == 64 ? 256 : 128; }

// Heads a logits / P·V block: 16 by default, four times the blocks (H100, batch 1: CSA decode
// attention 0.036 → 0.028 ms, HCA 0.023 → 0.019); DEEPINFER_CUDA_ATTN_DECODE_HEADS=64 keeps 64.
// The same bits either way.
int g_heads = [] {
  const char* v = std::getenv("DEEPINFER_CUDA_ATTN_DECODE_HEADS");
  return v && std::atoi(v) == 64 ? 64 : 16;
}();
// The register softmax (the same bits), on by default (H100, 4-layer slice at batch 1, with the
// 16-head blocks and the rank top-k: 1.29 / 1.30 ms a step vs 1.30 / 1.31);
// DEEPINFER_CUDA_ATTN_DECODE_SOFTMAX=0 takes attention_tc.cu's softmax_kernel.
bool g_decode_softmax = env_switch("DEEPINFER_CUDA_ATTN_DECODE_SOFTMAX", true);

// 1. The logits: a block per (row, kBH heads, 32 slots), 4 warps; with 64 heads warp w owns heads
// 16w … 16w + 15 × the 32 slots, with 16 (four times the blocks, each reading a quarter of the q
// rows: at batch 1 a 64-head HCA launch is 5 blocks) warp w owns the 16 heads × slots 8w … 8w + 7.
// Either way the prefill logits_kernel's fragments and mma order per element (same bits); a
// chunk's q and key values are loaded into registers, all at once, two chunks ahead of the
// products.
template <bool kSplit, int kBH>
__global__ void __launch_bounds__(128) decode_logits_kernel(const Rows rw, const AttnArgs a, int S,
                                                            int groups, float* __restrict__ probs) {
  pdl_begin();
  constexpr int kMT = kBH / 16;                          // 16-head m tiles
  constexpr int kNW = kDecSlotTile / 8 * kMT / 4;        // 8-slot n tiles a warp
  constexpr int kQ = kBH * kQkChunk / 4 / 128;           // float4 of q a thread per chunk
  constexpr int kK = kDecSlotTile * kQkChunk / 4 / 128;  // float4 of keys a thread per chunk
  __shared__ __align__(16) __nv_bfloat16 qh[kBH * kQkLd], kh[kDecSlotTile * kQkLd];
  __shared__ __align__(16) __nv_bfloat16 ql[kSplit ? kBH * kQkLd : 8];
  __shared__ __align__(16) __nv_bfloat16 kl[kSplit ? kDecSlotTile * kQkLd : 8];
  __shared__ const float* keys[kDecSlotTile];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t r = blockIdx.x / groups;
  const int h0 = static_cast<int>(blockIdx.x % groups) * kBH;
  const int s0 = static_cast<int>(blockIdx.y) * kDecSlotTile;
  const int mt = warp % kMT, nb = warp / kMT * kNW;
  if (tid < kDecSlotTile) keys[tid] = s0 + tid < S ? attn_key_at(rw, a, r, s0 + tid) : nullptr;
  const int any = __syncthreads_or(tid < kDecSlotTile && keys[tid] != nullptr);
  float* out = probs + (r * a.H + h0) * S;
  if (!any) {
    for (int i = tid; i < kBH * kDecSlotTile; i += 128) {
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
  float acc[kNW][4] = {};
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
      load_a(ah, qh, kQkLd, mt * 16, k0);
      if (kSplit) load_a(al, ql, kQkLd, mt * 16, k0);
#pragma unroll
      for (int nt = 0; nt < kNW; ++nt) {
        uint32_t bh[2];
        load_b(bh, kh, kQkLd, (nb + nt) * 8, k0);
        mma(acc[nt], ah, bh);
        if (kSplit) {
          uint32_t bl[2];
          load_b(bl, kl, kQkLd, (nb + nt) * 8, k0);
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
  for (int nt = 0; nt < kNW; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int head = mt * 16 + g + (i >= 2 ? 8 : 0), j = (nb + nt) * 8 + 2 * t + (i & 1);
      if (s0 + j < S)
        out[static_cast<int64_t>(head) * S + s0 + j] = keys[j] ? acc[nt][i] * a.scale : -INFINITY;
    }
  }
}

// 2. The softmax (S ≤ kDecodeMaxSlots): attention_tc.cu's softmax_kernel's lanes, operations
// and order (the same bits), but every logit a warp needs read into registers in one round trip
// instead of one per 64-slot tile, the tiles' maxima and sums reduced independently of each other
// (only the running maximum and the denominator run tile after tile, in registers) and each weight
// written once.
constexpr int kDecTiles = kDecodeMaxSlots / kSlotTile;  // official tiles
constexpr int kDecLaneSlots = kDecodeMaxSlots / 32;     // slots a lane holds

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
      if (32 * k >= S) break;  // uniform: the later loops stop there too
      const int s = lane + 32 * k;
      l[k] = s < S ? pr[s] : -INFINITY;
      if (s < S) m = fmaxf(m, l[k]);
    }
    m = warp_max(m);
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kDecLaneSlots; ++k) {
      if (32 * k >= S) break;
      if (lane + 32 * k >= S) continue;
      l[k] = l[k] == -INFINITY ? 0.0f : expf(l[k] - m);
      sum += l[k];
    }
    const float inv = 1.0f / (warp_sum(sum) + expf(sink - m));
#pragma unroll
    for (int k = 0; k < kDecLaneSlots; ++k) {
      if (32 * k >= S) break;
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
  // Every loop below stops at the row's last slot or tile (uniform across the warp: one row, one
  // head), so a short row does not pay for kDecodeMaxSlots; the tiles past n_tiles were no-ops.
  uint32_t missing = 0;  // bit k: slot lane + 32 k is outside the order and has no key
  int sl[kDecTiles][2];
  float l[kDecTiles][2];
#pragma unroll
  for (int k = 0; k < kDecLaneSlots; ++k) {
    if (32 * k >= S) break;
    const int s = lane + 32 * k;
    if (s < S && rank_of(s) < 0 && pr[s] == -INFINITY) missing |= 1u << k;
  }
#pragma unroll
  for (int T = 0; T < kDecTiles; ++T) {
    if (T >= n_tiles) break;
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int64_t t = int64_t{T} * kSlotTile + u * 32 + lane;
      sl[T][u] = t < n_slots ? order.slot(t) : -1;
      l[T][u] = sl[T][u] >= 0 ? pr[sl[T][u]] : -INFINITY;
    }
  }
  uint32_t any = 0;  // bit T: the tile has a slot
  float run_max = -INFINITY, denom = 0.0f, resc[kDecTiles], tile_max[kDecTiles];
#pragma unroll
  for (int T = 0; T < kDecTiles; ++T) {
    if (T >= n_tiles) break;
    if (__any_sync(0xffffffffu, sl[T][0] >= 0 || sl[T][1] >= 0)) any |= 1u << T;
    tile_max[T] = warp_max(fmaxf(l[T][0], l[T][1]));
  }
#pragma unroll
  for (int T = 0; T < kDecTiles; ++T) {  // tile_max becomes the running maximum after tile T
    if (T >= n_tiles) break;
    resc[T] = 1.0f;
    if (!(any >> T & 1)) continue;
    const float new_max = fmaxf(run_max, tile_max[T]);
    resc[T] = expf(run_max - new_max);
    tile_max[T] = run_max = new_max;
  }
  float psum[kDecTiles];
#pragma unroll
  for (int T = 0; T < kDecTiles; ++T) {
    if (T >= n_tiles) break;
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
    if (T >= n_tiles) break;
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
    if (32 * k >= S) break;
    if (missing >> k & 1) pr[lane + 32 * k] = 0.0f;
  }
}

// 3. P·V: a block per (row, kBH heads, 32 dims), slots in steps of 64 with the next two steps'
// loads in flight and every key address of the row resolved once up front (S ≤ kDecodeMaxSlots).
// 64 heads: 8 warps of 16 heads × 16 dims; 16 heads (four times the blocks: at batch 1 the 64-head
// launch is 16 blocks walking every slot): 4 warps of 16 heads × 8 dims. Per element the same
// 16-slot mma sequence as the prefill pv_kernel (same bits).
template <bool kSplitV, int kBH>
__global__ void __launch_bounds__(pv_threads(kBH))
    decode_pv_kernel(const Rows rw, const AttnArgs a, int S, int groups,
                     const float* __restrict__ probs, float* __restrict__ o) {
  pdl_begin();
  constexpr int kThreads = pv_threads(kBH), kMT = kBH / 16;
  constexpr int kNW = kDecPvDims / 8 * kMT / (kThreads / 32);  // 8-dim n tiles a warp
  constexpr int kP = kBH * kDecPvSlots / kThreads;             // probabilities a thread per step
  constexpr int kV = kDecPvSlots * kDecPvDims / 4 / kThreads;  // float4 of values a thread per step
  constexpr int kRow = kDecPvDims / 4;                         // float4 per value row
  __shared__ __align__(16) __nv_bfloat16 ph[kBH * kDecLdP], pl[kBH * kDecLdP];
  __shared__ __align__(16) __nv_bfloat16 vh[kDecPvSlots * kDecLdV];
  __shared__ __align__(16) __nv_bfloat16 vl[kSplitV ? kDecPvSlots * kDecLdV : 8];
  __shared__ const float* keys[kDecodeMaxSlots];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t r = blockIdx.x / groups;
  const int h0 = static_cast<int>(blockIdx.x % groups) * kBH;
  const int c0 = static_cast<int>(blockIdx.y) * kDecPvDims;
  const int mt = warp % kMT, nb = warp / kMT * kNW;
  for (int s = tid; s < S; s += kThreads) keys[s] = attn_key_at(rw, a, r, s);
  __syncthreads();
  const float* pr = probs + (r * a.H + h0) * S;
  using PRegs = float[kP];
  using VRegs = float4[kV];
  auto fetch = [&](int s0, PRegs& pn, VRegs& vn) {
#pragma unroll
    for (int u = 0; u < kP; ++u) {
      const int i = tid + u * kThreads, row = i / kDecPvSlots, j = i % kDecPvSlots;
      pn[u] = s0 + j < S && keys[s0 + j] ? pr[static_cast<int64_t>(row) * S + s0 + j] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kV; ++u) {
      const int i = tid + u * kThreads, j = i / kRow;
      const float* k = s0 + j < S ? keys[s0 + j] : nullptr;
      vn[u] = k ? *reinterpret_cast<const float4*>(k + c0 + i % kRow * 4) : float4{0, 0, 0, 0};
    }
  };
  float acc[kNW][4] = {};
  // Stages step s0 (held in pn / vn), refills them with step s0 + 2 · 64, then multiplies.
  auto step = [&](int s0, PRegs& pn, VRegs& vn) {
#pragma unroll
    for (int u = 0; u < kP; ++u) {
      const int i = tid + u * kThreads, row = i / kDecPvSlots, j = i % kDecPvSlots;
      split(pn[u], ph[row * kDecLdP + j], pl[row * kDecLdP + j]);
    }
#pragma unroll
    for (int u = 0; u < kV; ++u) {
      const int i = tid + u * kThreads;
      store4(vh, vl, kDecLdV, i / kRow, i % kRow * 4, vn[u], !kSplitV, kSplitV);
    }
    __syncthreads();
    if (s0 + 2 * kDecPvSlots < S) fetch(s0 + 2 * kDecPvSlots, pn, vn);  // two steps in flight
#pragma unroll
    for (int k0 = 0; k0 < kDecPvSlots; k0 += 16) {
      uint32_t ah[4], al[4];
      load_a(ah, ph, kDecLdP, mt * 16, k0);
      load_a(al, pl, kDecLdP, mt * 16, k0);
#pragma unroll
      for (int nt = 0; nt < kNW; ++nt) {
        uint32_t bh[2];
        load_b_trans(bh, vh, kDecLdV, k0, (nb + nt) * 8);
        mma(acc[nt], ah, bh);
        mma(acc[nt], al, bh);
        if (kSplitV) {
          uint32_t bl[2];
          load_b_trans(bl, vl, kDecLdV, k0, (nb + nt) * 8);
          mma(acc[nt], ah, bl);
        }
      }
    }
    __syncthreads();
  };
  PRegs pa, pb;
  VRegs va, vb;
  fetch(0, pa, va);
  if (kDecPvSlots < S) fetch(kDecPvSlots, pb, vb);
  for (int s0 = 0; s0 < S; s0 += 2 * kDecPvSlots) {
    step(s0, pa, va);
    if (s0 + kDecPvSlots < S) step(s0 + kDecPvSlots, pb, vb);
  }
  const int g = lane / 4, t = lane % 4;
  float* out = o + (r * a.H + h0) * a.D + c0 + nb * 8;
  // rope_round_bf16's pair index of the first rotated pair; a thread's two values are a pair.
  const int first = a.official && a.out_pairs > 0 ? a.D / 2 - a.out_pairs : a.D;
#pragma unroll
  for (int nt = 0; nt < kNW; ++nt) {
    const int p2 = (c0 + nb * 8 + nt * 8 + 2 * t) / 2;
    float c = 1.0f, s = 0.0f;
    if (p2 >= first) {  // rope_round_bf16's inverse rotation, its expressions
      const float phi = a.out_inv_freq[p2 - first] * static_cast<float>(rw.pos[r]);
      c = cosf(phi) * a.out_factor;
      s = sinf(phi) * a.out_factor;
      s = -s;
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int head = mt * 16 + g + half * 8;
      float2 v{acc[nt][2 * half], acc[nt][2 * half + 1]};
      if (a.official) v = float2{bf16r(v.x), bf16r(v.y)};
      if (p2 >= first) {
        const float2 y = rotate_pair(v.x, v.y, c, s);
        v = float2{bf16r(y.x), bf16r(y.y)};
      }
      *reinterpret_cast<float2*>(out + static_cast<int64_t>(head) * a.D + nt * 8 + 2 * t) = v;
    }
  }
}

template <int kBH>
void launch_logits(Exec& e, const Rows& rows, const AttnArgs& a, int S, float* probs) {
  const int groups = a.H / kBH;
  const dim3 grid(static_cast<unsigned>(rows.n * groups),
                  static_cast<unsigned>((S + kDecSlotTile - 1) / kDecSlotTile));
  if (a.official) {
    e.launch(decode_logits_kernel<false, kBH>, grid, 128, 0, rows, a, S, groups, probs);
  } else {
    e.launch(decode_logits_kernel<true, kBH>, grid, 128, 0, rows, a, S, groups, probs);
  }
}

template <int kBH>
void launch_pv(Exec& e, const Rows& rows, const AttnArgs& a, int S, const float* probs, float* o) {
  const int groups = a.H / kBH;
  const dim3 grid(static_cast<unsigned>(rows.n * groups), static_cast<unsigned>(a.D / kDecPvDims));
  auto kernel = a.official ? decode_pv_kernel<false, kBH> : decode_pv_kernel<true, kBH>;
  e.launch(kernel, grid, pv_threads(kBH), 0, rows, a, S, groups, probs, o);
}

}  // namespace

bool attention_tc_decode_softmax() { return g_decode_softmax; }
void set_attention_tc_decode_softmax(bool on) { g_decode_softmax = on; }
int attention_tc_decode_heads() { return g_heads; }
void set_attention_tc_decode_heads(int heads) { g_heads = heads == 64 ? 64 : 16; }

void decode_logits_tc(Exec& e, const Rows& rows, const AttnArgs& a, int S, float* probs) {
  if (g_heads == 16) {
    launch_logits<16>(e, rows, a, S, probs);
  } else {
    launch_logits<64>(e, rows, a, S, probs);
  }
  e.note(cudaGetLastError());
}

bool decode_softmax_tc(Exec& e, const Rows& rows, const AttnArgs& a, int S, float* probs) {
  if (!g_decode_softmax) return false;
  const int64_t pairs = rows.n * a.H;
  const unsigned blocks = static_cast<unsigned>((pairs + kSoftmaxWarps - 1) / kSoftmaxWarps);
  e.launch(decode_softmax_kernel, blocks, kSoftmaxWarps * 32, 0, rows, a, S, probs);
  e.note(cudaGetLastError());
  return true;
}

bool decode_pv_tc(Exec& e, const Rows& rows, const AttnArgs& a, int S, const float* probs,
                  float* o) {
  if (g_heads == 16) {
    launch_pv<16>(e, rows, a, S, probs, o);
  } else {
    launch_pv<64>(e, rows, a, S, probs, o);
  }
  e.note(cudaGetLastError());
  return a.official && a.out_pairs > 0;
}

}  // namespace deepinfer::cuda
