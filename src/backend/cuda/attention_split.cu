// Split-KV decode attention (fast_ops.cuh): the slots of a (row, head) in chunks, a block per
// (row, head, chunk), merged by a second step. For long contexts (the one-block kernel keeps the
// whole slot list in shared memory) and small batches (a block per (row, head) is 64 blocks at
// batch 1, half the SMs).
//   Exact: each chunk's logits, its max m, Σ exp(l − m) and Σ exp(l − m) · key; the merge takes
//   the max over chunks and the sink (counted once), rescales and divides.
//   Official: the reference's tiled softmax needs each 64-slot tile's running max from all
//   earlier tiles, so the logits (pass 1) come before one block per (row, head) that runs the
//   reference's tile recurrence and writes every slot's bf16 weight (pass 2, the same bits as the
//   reference's probabilities); then P·V by chunks (pass 3) and their sum (pass 4). Only that
//   last sum's order differs from the reference (chunk sums added, not one running sum), so the
//   bf16 outputs can differ from the reference's in the last bit.
#include <cstdlib>
#include <cstring>

#include "backend/cuda/fast_ops.cuh"
#include "backend/cuda/gemm_lt.cuh"
#include "backend/cuda/official_softmax.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kThreads = 256, kTile = 64;
constexpr int kMaxChunk = 1024;       // slots per block (their logits and keys in shared memory)
constexpr int kMaxSplitTiles = 1024;  // official: 64k slots (HCA at 8M positions)

int g_split_mode = [] {
  const char* env = std::getenv("DEEPINFER_CUDA_SPLIT_KV");
  if (!env) return -1;
  return std::strcmp(env, "0") == 0 ? 0 : 1;
}();

__device__ float block_reduce(float v, float* red, bool take_max) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = take_max ? fmaxf(v, o) : v + o;
  }
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float r = take_max ? -INFINITY : 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) r = take_max ? fmaxf(r, red[w]) : r + red[w];
  __syncthreads();
  return r;
}

// The key of chunk position i (exact: probability slot c0 + i; official: the reference's slot
// order t = c0 + i), or null.
__device__ const float* chunk_key(const Rows& rw, const AttnArgs& a, int64_t r,
                                  const OfficialSlots& order, int64_t idx) {
  if (!a.official) return attn_key_at(rw, a, r, static_cast<int>(idx));
  if (idx >= order.n_slots) return nullptr;
  const int s = order.slot(idx);
  return s < 0 ? nullptr : attn_key_at(rw, a, r, s);
}

// keys[i] and lg[i] = q · key · scale (−inf without a key) for the chunk's len slots; a thread per
// slot, the dot product in column order, as the reference body (so official logits are its bits).
// (Staging the keys through shared memory a warp per 32 slots, coalesced, measured slower on the
// H200 at decode sizes: fewer loads in flight.)
__device__ void chunk_logits(const Rows& rw, const AttnArgs& a, int64_t r, int64_t rh,
                             const OfficialSlots& order, int64_t c0, int len, float* qs,
                             const float** keys, float* lg) {
  const int D = a.D, tid = threadIdx.x;
  const float* q = a.q + rh * D;
  for (int c = tid; c < D; c += kThreads) qs[c] = a.official ? bf16r(q[c]) : q[c];
  __syncthreads();
  for (int i = tid; i < len; i += kThreads) {
    const float* k = chunk_key(rw, a, r, order, c0 + i);
    keys[i] = k;
    float d = 0.0f;
    if (k) {
#pragma unroll 4
      for (int c = 0; c < D; c += 4) {
        const float4 kv = *reinterpret_cast<const float4*>(k + c);
        d += qs[c] * kv.x;
        d += qs[c + 1] * kv.y;
        d += qs[c + 2] * kv.z;
        d += qs[c + 3] * kv.w;
      }
    }
    lg[i] = k ? d * a.scale : -INFINITY;
  }
  __syncthreads();
}

// acc[j] (column tid + j · 256) = Σ_i w[i] · keys[i][column], zero weights skipped; the keys of
// 16 slots loaded before their products are summed.
template <int kCols>
__device__ void chunk_pv(const float* w, const float* const* keys, int len, int D,
                         float (&acc)[kCols]) {
  constexpr int kAhead = 16;
  const int tid = threadIdx.x;
#pragma unroll
  for (int j = 0; j < kCols; ++j) acc[j] = 0.0f;
  for (int i0 = 0; i0 < len; i0 += kAhead) {
    float wu[kAhead], kv[kAhead][kCols];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const int i = i0 + u;
      const float* k = i < len ? keys[i] : nullptr;
      wu[u] = k ? w[i] : 0.0f;
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        const int c = tid + j * kThreads;
        kv[u][j] = (wu[u] != 0.0f && c < D) ? k[c] : 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      if (wu[u] == 0.0f) continue;
#pragma unroll
      for (int j = 0; j < kCols; ++j) acc[j] += wu[u] * kv[u][j];
    }
  }
}

// Exact, per (row, head, chunk): part[(rh · chunks + b)] = [Σ e · key (D), m, Σ e], e = exp(l − m).
template <int kCols>
__global__ void __launch_bounds__(kThreads)
    split_exact_kernel(const Rows rw, const AttnArgs a, int S, int chunk,
                       float* __restrict__ part) {
  pdl_begin();
  __shared__ const float* keys[kMaxChunk];
  __shared__ float lg[kMaxChunk], qs[4 * kThreads], red[kThreads / 32];
  const int64_t rh = blockIdx.x, r = rh / a.H;
  const int b = blockIdx.y, chunks = gridDim.y, D = a.D;
  const int64_t c0 = int64_t{b} * chunk;
  const int len = static_cast<int>(S - c0 < chunk ? S - c0 : chunk);
  const OfficialSlots none{};
  chunk_logits(rw, a, r, rh, none, c0, len, qs, keys, lg);
  float m = -INFINITY;
  for (int i = threadIdx.x; i < len; i += kThreads) m = fmaxf(m, lg[i]);
  m = block_reduce(m, red, true);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < len; i += kThreads) {
    const float e = lg[i] == -INFINITY ? 0.0f : expf(lg[i] - m);
    lg[i] = e;
    sum += e;
  }
  sum = block_reduce(sum, red, false);  // its barrier also publishes lg
  float acc[kCols];
  chunk_pv<kCols>(lg, keys, len, D, acc);
  float* out = part + (rh * chunks + b) * (D + 2);
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    const int c = threadIdx.x + j * kThreads;
    if (c < D) out[c] = acc[j];
  }
  if (threadIdx.x == 0) {
    out[D] = m;
    out[D + 1] = sum;
  }
}

// Exact merge: M = max(sink, m_b), o = Σ_b acc_b · exp(m_b − M) / (exp(sink − M) + Σ_b sum_b ·
// exp(m_b − M)).
__global__ void __launch_bounds__(kThreads)
    split_exact_merge_kernel(const AttnArgs a, int chunks, const float* __restrict__ part,
                             float* __restrict__ o) {
  pdl_begin();
  const int64_t rh = blockIdx.x;
  const int D = a.D;
  const float* p = part + rh * chunks * (D + 2);
  const float sink = a.sink[rh % a.H];
  float M = sink;
  for (int b = 0; b < chunks; ++b) M = fmaxf(M, p[b * (D + 2) + D]);
  float denom = expf(sink - M);
  for (int b = 0; b < chunks; ++b) {
    const float mb = p[b * (D + 2) + D];
    if (mb != -INFINITY) denom += p[b * (D + 2) + D + 1] * expf(mb - M);
  }
  const float inv = 1.0f / denom;
  for (int c = threadIdx.x; c < D; c += kThreads) {
    float acc = 0.0f;
    for (int b = 0; b < chunks; ++b) {
      const float mb = p[b * (D + 2) + D];
      if (mb != -INFINITY) acc += p[b * (D + 2) + c] * expf(mb - M);
    }
    o[rh * D + c] = acc * inv;
  }
}

// Official pass 1: logits[rh · S + t] in the reference's slot order (−inf for padding).
__global__ void __launch_bounds__(kThreads)
    split_official_logits_kernel(const Rows rw, const AttnArgs a, int S, int chunk,
                                 float* __restrict__ logits) {
  pdl_begin();
  __shared__ const float* keys[kMaxChunk];
  __shared__ float lg[kMaxChunk], qs[4 * kThreads];
  const int64_t rh = blockIdx.x, r = rh / a.H;
  const int64_t c0 = int64_t{blockIdx.y} * chunk;
  const int len = static_cast<int>(S - c0 < chunk ? S - c0 : chunk);
  const OfficialSlots order = official_slots(rw, a, r);
  chunk_logits(rw, a, r, rh, order, c0, len, qs, keys, lg);
  for (int i = threadIdx.x; i < len; i += kThreads) logits[rh * S + c0 + i] = lg[i];
}

// Official pass 2, a block per (row, head): the reference's tile recurrence (attention.cu), then
// every slot's weight bf16(exp(l − max_T)) · Π_{T' > T} rescale_T' / denom in place (0: padding).
__global__ void __launch_bounds__(kThreads)
    split_official_softmax_kernel(const Rows rw, const AttnArgs a, int S,
                                  float* __restrict__ logits) {
  pdl_begin();
  __shared__ float tile_max[kMaxSplitTiles], rescale[kMaxSplitTiles], psum[kMaxSplitTiles],
      later[kMaxSplitTiles];
  __shared__ int tile_any[kMaxSplitTiles];
  const int tid = threadIdx.x;
  const int64_t rh = blockIdx.x, r = rh / a.H;
  float* pr = logits + rh * S;  // indexed by t
  const OfficialSlots order = official_slots(rw, a, r);
  const int64_t n_slots = order.n_slots;
  official_tile_softmax<kThreads, kTile>(
      pr, n_slots, a.sink[rh % a.H],
      [&](int64_t t) -> int64_t { return order.slot(t) < 0 ? -1 : t; },
      {tile_max, rescale, psum, later, tile_any});
  for (int64_t t = tid; t < S; t += kThreads) {
    const int T = static_cast<int>(t / kTile);
    pr[t] =
        (t < n_slots && order.slot(t) >= 0) ? bf16r(expf(pr[t] - tile_max[T])) * later[T] : 0.0f;
  }
}

// Official pass 3: part[(rh · chunks + b) · D + c] = the chunk's Σ weight · key.
template <int kCols>
__global__ void __launch_bounds__(kThreads)
    split_official_pv_kernel(const Rows rw, const AttnArgs a, int S, int chunk,
                             const float* __restrict__ weights, float* __restrict__ part) {
  pdl_begin();
  __shared__ const float* keys[kMaxChunk];
  const int64_t rh = blockIdx.x, r = rh / a.H;
  const int b = blockIdx.y, chunks = gridDim.y, D = a.D;
  const int64_t c0 = int64_t{b} * chunk;
  const int len = static_cast<int>(S - c0 < chunk ? S - c0 : chunk);
  const OfficialSlots order = official_slots(rw, a, r);
  for (int i = threadIdx.x; i < len; i += kThreads) keys[i] = chunk_key(rw, a, r, order, c0 + i);
  __syncthreads();
  float acc[kCols];
  chunk_pv<kCols>(weights + rh * S + c0, keys, len, D, acc);
  float* out = part + (rh * chunks + b) * D;
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    const int c = threadIdx.x + j * kThreads;
    if (c < D) out[c] = acc[j];
  }
}

// Official pass 4: o = bf16(Σ_b part_b), the chunks in order.
__global__ void __launch_bounds__(kThreads)
    split_official_sum_kernel(const AttnArgs a, int chunks, const float* __restrict__ part,
                              float* __restrict__ o) {
  pdl_begin();
  const int64_t rh = blockIdx.x;
  const int D = a.D;
  for (int c = threadIdx.x; c < D; c += kThreads) {
    float acc = 0.0f;
    for (int b = 0; b < chunks; ++b) acc += part[(rh * chunks + b) * D + c];
    o[rh * D + c] = bf16r(acc);
  }
}

}  // namespace

void set_split_kv_mode(int mode) { g_split_mode = mode; }
int split_kv_mode() { return g_split_mode; }

SplitKvPlan split_kv_plan(const Rows& rows, const AttnArgs& a) {
  SplitKvPlan p;
  const int64_t S = int64_t{a.W} + a.cslots();
  const int64_t rh = rows.n * a.H;
  if (g_split_mode == 0 || rh <= 0 || S <= 0 || a.D % 4 != 0 || a.D > 4 * kThreads) return p;
  if (a.official && (S + kTile - 1) / kTile > kMaxSplitTiles) return p;
  if (reinterpret_cast<uintptr_t>(a.kv) % 16 || reinterpret_cast<uintptr_t>(a.ring) % 16 ||
      reinterpret_cast<uintptr_t>(a.cmp) % 16)
    return p;
  const bool one_block = attention_fast_supported(a);
  const int64_t tiles = (S + kTile - 1) / kTile;
  int64_t chunks = (S + kMaxChunk - 1) / kMaxChunk;
  // Batch-invariant mode: a row's sums must not depend on the batch, so the split only where the
  // one-block kernel cannot run, and then by S alone.
  if (!batch_invariant()) chunks = std::max<int64_t>(chunks, (2 * sm_count() + rh - 1) / rh);
  chunks = std::min(chunks, tiles);
  // Scratch (floats): exact chunks · (D + 2) per (row, head); official S + chunks · D.
  const int64_t avail = (a.scratch > 0 ? a.scratch : rh * S) / rh;
  const int64_t fit = a.official ? (avail - S) / a.D : avail / (a.D + 2);
  chunks = std::min(chunks, fit);
  if (chunks < 1) return p;
  const int64_t chunk = (S + chunks - 1) / chunks;
  const int64_t aligned = (chunk + kTile - 1) / kTile * kTile;
  if (aligned > kMaxChunk) return p;
  chunks = (S + aligned - 1) / aligned;
  // Official: four launches against the one-block kernel's one; at batch 1 on the H200 the split
  // was no faster (0.30 vs 0.29 ms a step over 4 layers), so only where that kernel cannot run.
  if (one_block && g_split_mode != 1 && (chunks < 2 || batch_invariant() || a.official)) return p;
  p.chunks = static_cast<int>(chunks);
  p.chunk = static_cast<int>(aligned);
  p.S = static_cast<int>(S);
  return p;
}

void attention_split(Exec& e, const Rows& rows, const AttnArgs& a, const SplitKvPlan& p,
                     float* scratch, float* o) {
  const unsigned rh = static_cast<unsigned>(rows.n * a.H);
  const dim3 grid(rh, static_cast<unsigned>(p.chunks));
  const int cols = a.D <= kThreads ? 1 : a.D <= 2 * kThreads ? 2 : 4;
  if (!a.official) {
    if (cols == 1)
      e.launch(split_exact_kernel<1>, grid, kThreads, 0, rows, a, p.S, p.chunk, scratch);
    if (cols == 2)
      e.launch(split_exact_kernel<2>, grid, kThreads, 0, rows, a, p.S, p.chunk, scratch);
    if (cols == 4)
      e.launch(split_exact_kernel<4>, grid, kThreads, 0, rows, a, p.S, p.chunk, scratch);
    e.launch(split_exact_merge_kernel, rh, kThreads, 0, a, p.chunks, scratch, o);
    e.note(cudaGetLastError());
    return;
  }
  float* weights = scratch;
  float* part = scratch + int64_t{rh} * p.S;
  e.launch(split_official_logits_kernel, grid, kThreads, 0, rows, a, p.S, p.chunk, weights);
  e.launch(split_official_softmax_kernel, rh, kThreads, 0, rows, a, p.S, weights);
  if (cols == 1)
    e.launch(split_official_pv_kernel<1>, grid, kThreads, 0, rows, a, p.S, p.chunk, weights, part);
  if (cols == 2)
    e.launch(split_official_pv_kernel<2>, grid, kThreads, 0, rows, a, p.S, p.chunk, weights, part);
  if (cols == 4)
    e.launch(split_official_pv_kernel<4>, grid, kThreads, 0, rows, a, p.S, p.chunk, weights, part);
  e.launch(split_official_sum_kernel, rh, kThreads, 0, a, p.chunks, part, o);
  e.note(cudaGetLastError());
}

}  // namespace deepinfer::cuda
