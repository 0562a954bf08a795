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
// Decode-sized launches (≤ DEEPINFER_CUDA_ATTN_TC_DECODE_ROWS rows) take the variants of
// attention_tc_decode.cu on more, smaller blocks (32 slots, 32 dims) with the next chunk's loads
// in flight during the current chunk's products; each output element gets the same mma sequence
// as here, so the results are the same bits and a row's result still does not depend on the
// launch's row count.
// Rounding: official q and keys are bf16-exact (the reference rounds them), so their products are
// exact and only the summation order differs; fp32 values (exact q/keys, every probability) are
// split into bf16 hi + lo and multiplied as hi·hi + hi·lo + lo·hi (≈ 16 significand bits).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdlib>

#include "backend/cuda/attention_tc.cuh"
#include "backend/cuda/attention_tc_decode.cuh"
#include "backend/cuda/cuda_model.h"
#include "backend/cuda/formats.cuh"
#include "backend/cuda/mma_bf16.cuh"
#include "backend/cuda/row_reduce.cuh"

namespace deepinfer::cuda {
namespace {

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

void launch_softmax(Exec& e, const Rows& rows, const AttnArgs& a, int S, float* probs) {
  const int64_t pairs = rows.n * a.H;
  const unsigned blocks = static_cast<unsigned>((pairs + kSoftmaxWarps - 1) / kSoftmaxWarps);
  e.launch(softmax_kernel, blocks, kSoftmaxWarps * 32, 0, rows, a, S, probs);
  e.note(cudaGetLastError());
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

bool attention_tc_run(Exec& e, const Rows& rows, const AttnArgs& a, float* probs, float* o) {
  if (rows.n <= 0) return false;
  const int S = a.W + a.cslots();
  // By row count and shapes only; either way the same bits (attention_tc_decode.cuh).
  if (g_decode && S <= kDecodeMaxSlots && rows.n <= g_decode_rows) {
    decode_logits_tc(e, rows, a, S, probs);
    if (!decode_softmax_tc(e, rows, a, S, probs)) launch_softmax(e, rows, a, S, probs);
    return decode_pv_tc(e, rows, a, S, probs, o);
  }
  const int groups = a.H / kHeads;
  const unsigned row_groups = static_cast<unsigned>(rows.n * groups);
  const dim3 lg(row_groups, static_cast<unsigned>((S + kSlotTile - 1) / kSlotTile));
  if (a.official) {
    e.launch(logits_kernel<false>, lg, 128, 0, rows, a, S, groups, probs);
  } else {
    e.launch(logits_kernel<true>, lg, 128, 0, rows, a, S, groups, probs);
  }
  e.note(cudaGetLastError());
  launch_softmax(e, rows, a, S, probs);
  const dim3 pg(row_groups, static_cast<unsigned>(a.D / kPvDims));
  if (a.official) {
    e.launch(pv_kernel<false>, pg, 256, 0, rows, a, S, groups, probs, o);
  } else {
    e.launch(pv_kernel<true>, pg, 256, 0, rows, a, S, groups, probs, o);
  }
  e.note(cudaGetLastError());
  return false;
}

}  // namespace deepinfer::cuda
