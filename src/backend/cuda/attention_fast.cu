// Block-parallel attention and Lightning Indexer for the device (fast_ops.cuh). Every value is
// computed by the same expression, in the same order, as the reference bodies of attention.cu:
// only the work is spread over the threads of a block, and the few sums that are sequential in
// the reference (softmax denominators, the indexer's sum over heads) stay sequential, in one
// thread over shared memory.
#include "backend/cuda/fast_ops.cuh"
#include "backend/cuda/indexer_tc.cuh"
#include "backend/cuda/official_softmax.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kAttnThreads = 256;
constexpr int kTile = 64, kMaxTiles = 128;  // the official softmax's tiles (attention.cu)
constexpr size_t kSharedLimit = 40 * 1024;  // dynamic shared bytes (static ones come on top)

size_t attention_shared_bytes(const AttnArgs& a) {
  const size_t S = static_cast<size_t>(a.W + a.cslots());
  return S * (sizeof(const float*) + sizeof(float)) + static_cast<size_t>(a.D) * sizeof(float);
}

__device__ float block_max(float v, float* shared) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float m = -INFINITY;
  for (int w = 0; w < kAttnThreads / 32; ++w) m = fmaxf(m, shared[w]);
  __syncthreads();
  return m;
}

// One block per (row, head); kCols output columns per thread (D ≤ kCols · kAttnThreads).
template <int kCols>
__global__ void __launch_bounds__(kAttnThreads)
    attention_kernel(const Rows rw, const AttnArgs a, int S, float* __restrict__ o) {
  pdl_begin();
  extern __shared__ unsigned char shared_bytes[];
  const int D = a.D;
  const float** keys = reinterpret_cast<const float**>(shared_bytes);
  float* pr = reinterpret_cast<float*>(keys + S);
  float* qs = pr + S;
  __shared__ float tile_max[kMaxTiles], rescale[kMaxTiles], psum[kMaxTiles], later[kMaxTiles];
  __shared__ int tile_any[kMaxTiles];
  __shared__ float red[kAttnThreads / 32];
  __shared__ float row_scale;
  const int tid = threadIdx.x;
  const int64_t rh = blockIdx.x, r = rh / a.H;
  const int h = static_cast<int>(rh % a.H);

  const float* q = a.q + rh * D;
  for (int c = tid; c < D; c += kAttnThreads) qs[c] = a.official ? bf16r(q[c]) : q[c];
  __syncthreads();
  // Logits: a thread per slot, its dot product in column order (as the reference); each thread
  // runs its slots s, s + 256, s + 512 side by side, so their loads and FMA chains overlap.
  constexpr int kSide = 3;
  for (int s0 = tid; s0 < S; s0 += kSide * kAttnThreads) {
    const float* k[kSide];
    float d[kSide];
#pragma unroll
    for (int u = 0; u < kSide; ++u) {
      const int s = s0 + u * kAttnThreads;
      k[u] = s < S ? attn_key_at(rw, a, r, s) : nullptr;
      if (s < S) keys[s] = k[u];
      d[u] = 0.0f;
    }
#pragma unroll 4
    for (int c = 0; c < D; c += 4) {
      const float q0 = qs[c], q1 = qs[c + 1], q2 = qs[c + 2], q3 = qs[c + 3];
#pragma unroll
      for (int u = 0; u < kSide; ++u) {
        if (!k[u]) continue;
        const float4 kv = *reinterpret_cast<const float4*>(k[u] + c);
        d[u] += q0 * kv.x;
        d[u] += q1 * kv.y;
        d[u] += q2 * kv.z;
        d[u] += q3 * kv.w;
      }
    }
#pragma unroll
    for (int u = 0; u < kSide; ++u) {
      const int s = s0 + u * kAttnThreads;
      if (s < S) pr[s] = k[u] ? d[u] * a.scale : -INFINITY;
    }
  }
  __syncthreads();
  const float sink = a.sink[h];
  if (!a.official) {
    const float m = fmaxf(sink, block_max(
                                    [&] {
                                      float v = -INFINITY;
                                      for (int s = tid; s < S; s += kAttnThreads)
                                        v = fmaxf(v, pr[s]);
                                      return v;
                                    }(),
                                    red));
    for (int s = tid; s < S; s += kAttnThreads) pr[s] = pr[s] == -INFINITY ? 0.0f : expf(pr[s] - m);
    __syncthreads();
    if (tid == 0) {
      float sum = expf(sink - m);
#pragma unroll 8
      for (int s = 0; s < S; ++s) sum += pr[s];
      row_scale = 1.0f / sum;
    }
    __syncthreads();
    const float inv = row_scale;
    for (int s = tid; s < S; s += kAttnThreads) pr[s] *= inv;
  } else {
    const OfficialSlots order = official_slots(rw, a, r);
    const int64_t n_slots = order.n_slots;
    auto mine = [&](int64_t t) { return order.slot(t); };
    official_tile_softmax<kAttnThreads, kTile>(pr, n_slots, sink, mine,
                                               {tile_max, rescale, psum, later, tile_any});
    for (int64_t t = tid; t < n_slots; t += kAttnThreads) {
      const int s = mine(t);
      const int T = static_cast<int>(t / kTile);
      if (s >= 0) pr[s] = bf16r(expf(pr[s] - tile_max[T])) * later[T];
    }
    __syncthreads();
    for (int s = tid; s < S; s += kAttnThreads) {
      if (pr[s] == -INFINITY) pr[s] = 0.0f;
    }
  }
  __syncthreads();
  // P·V: a thread per output column, slots in order (as the reference); the keys of 16 slots are
  // loaded before their products are summed, so the loads overlap.
  constexpr int kAhead = 16;
  float acc[kCols];
#pragma unroll
  for (int j = 0; j < kCols; ++j) acc[j] = 0.0f;
  for (int s0 = 0; s0 < S; s0 += kAhead) {
    float w[kAhead], kv[kAhead][kCols];
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const int s = s0 + u;
      const float* k = s < S ? keys[s] : nullptr;
      w[u] = k ? pr[s] : 0.0f;  // the reference skips a zero weight and a missing key alike
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        const int c = tid + j * kAttnThreads;
        kv[u][j] = (w[u] != 0.0f && c < D) ? k[c] : 0.0f;
      }
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      if (w[u] == 0.0f) continue;
#pragma unroll
      for (int j = 0; j < kCols; ++j) acc[j] += w[u] * kv[u][j];
    }
  }
  float* orow = o + rh * D;
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    const int c = tid + j * kAttnThreads;
    if (c < D) orow[c] = a.official ? bf16r(acc[j]) : acc[j];
  }
}

// Indexer scores: a block per (row, 32 entries); warp w takes heads w, w + 8, …, lane = entry.
constexpr int kIdxEntries = 32, kIdxThreads = 256, kIdxWarps = kIdxThreads / 32;
constexpr int kIdxMaxHeadsPerWarp = 8;  // heads a warp keeps in registers (V4: 64 heads)

size_t indexer_shared_bytes(const IndexerArgs& a) {
  return (static_cast<size_t>(kIdxEntries) * (a.dim + 1) +
          static_cast<size_t>(a.heads) * kIdxEntries) *
         sizeof(float);
}

__global__ void __launch_bounds__(kIdxThreads)
    indexer_scores_kernel(const Rows rw, const IndexerArgs ia, int64_t blocks_per_row, float sscale,
                          float* __restrict__ scores) {
  pdl_begin();
  extern __shared__ float ishared[];
  const int dim = ia.dim, H = ia.heads, tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int64_t r = blockIdx.x / blocks_per_row;
  const int64_t j0 = (blockIdx.x % blocks_per_row) * kIdxEntries;
  const int64_t cap = ia.capacity;
  const int64_t vis = (int64_t{rw.pos[r]} + 1) / ia.ratio;
  if (j0 >= vis) {
    for (int t = tid; t < kIdxEntries; t += kIdxThreads) {
      if (j0 + t < cap) scores[r * cap + j0 + t] = -INFINITY;
    }
    return;
  }
  float* ks = ishared;                               // [32][dim + 1]
  float* terms = ishared + kIdxEntries * (dim + 1);  // [heads][32]
  // The visible keys of this tile, row by row through the block table (a tile may span blocks).
  __shared__ const float* key_rows[kIdxEntries];
  const int64_t rows_here = vis - j0 < kIdxEntries ? vis - j0 : kIdxEntries;
  if (tid < rows_here) key_rows[tid] = ia.keys + entry_row(ia.pages, rw.seq[r], j0 + tid) * dim;
  __syncthreads();
  for (int64_t i = tid; i < rows_here * dim; i += kIdxThreads)
    ks[(i / dim) * (dim + 1) + i % dim] = key_rows[i / dim][i % dim];
  __syncthreads();
  const float* qr = ia.q + r * H * dim;
  const float* k = ks + lane * (dim + 1);
  auto term = [&](float d) { return ia.official ? bf16r(d) : (d > 0 ? d * sscale : 0.0f); };
  const int per_warp = H / kIdxWarps;
  if (H % kIdxWarps == 0 && per_warp <= kIdxMaxHeadsPerWarp && dim % 4 == 0 &&
      (reinterpret_cast<uintptr_t>(ia.q) & 15) == 0) {
    // A warp's heads at once: each key value read from shared memory once for all of them, q as
    // float4 broadcasts; every dot product still sums c = 0, 1, … in order (the same bits).
    float d[kIdxMaxHeadsPerWarp] = {};
    for (int c = 0; c < dim; c += 4) {
      const float k0 = k[c], k1 = k[c + 1], k2 = k[c + 2], k3 = k[c + 3];
#pragma unroll
      for (int u = 0; u < kIdxMaxHeadsPerWarp; ++u) {
        if (u >= per_warp) break;
        const float4 qv = *reinterpret_cast<const float4*>(qr + (warp + u * kIdxWarps) * dim + c);
        d[u] += qv.x * k0;
        d[u] += qv.y * k1;
        d[u] += qv.z * k2;
        d[u] += qv.w * k3;
      }
    }
#pragma unroll
    for (int u = 0; u < kIdxMaxHeadsPerWarp; ++u) {
      if (u >= per_warp) break;
      terms[(warp + u * kIdxWarps) * kIdxEntries + lane] = term(d[u]);
    }
  } else {
    for (int h = warp; h < H; h += kIdxWarps) {
      const float* qh = qr + h * dim;
      float d = 0.0f;
#pragma unroll 8
      for (int c = 0; c < dim; ++c) d += qh[c] * k[c];
      terms[h * kIdxEntries + lane] = term(d);
    }
  }
  __syncthreads();
  if (tid >= kIdxEntries) return;
  const int64_t j = j0 + tid;
  if (j >= cap) return;
  if (j >= vis) {
    scores[r * cap + j] = -INFINITY;
    return;
  }
  const float* wr = ia.w + r * H;
  float s = 0.0f;
  for (int h = 0; h < H; ++h) {
    const float t = terms[h * kIdxEntries + tid];
    if (ia.official) {
      if (t > 0) s += bf16r(t * wr[h]);
    } else {
      s += t * wr[h];
    }
  }
  scores[r * cap + j] = ia.official ? bf16r(s) : s;
}

// Top-k by rank: a thread per entry counts the entries ranked above it (descending score, lower
// id first among equals) over the row's scores, staged through shared memory in chunks.
constexpr int kRankThreads = 256, kRankChunk = 2048;

__global__ void __launch_bounds__(kRankThreads)
    indexer_rank_kernel(const Rows rw, const IndexerArgs ia, int64_t blocks_per_row,
                        const float* __restrict__ scores, int32_t* sel, int32_t* cnt) {
  pdl_begin();
  __shared__ float chunk[kRankChunk];
  const int64_t r = blockIdx.x / blocks_per_row;
  const int64_t j = (blockIdx.x % blocks_per_row) * kRankThreads + threadIdx.x;
  const int64_t vis = (int64_t{rw.pos[r]} + 1) / ia.ratio;
  const int64_t k = vis < ia.topk ? vis : ia.topk;
  if (j == 0) cnt[r] = static_cast<int32_t>(k);
  if ((blockIdx.x % blocks_per_row) * kRankThreads >= vis) return;  // the whole block
  const float* s = scores + r * ia.capacity;
  const float sj = j < vis ? s[j] : 0.0f;
  int64_t rank = 0;
  for (int64_t q0 = 0; q0 < vis; q0 += kRankChunk) {
    const int64_t n = vis - q0 < kRankChunk ? vis - q0 : kRankChunk;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < n; i += kRankThreads) chunk[i] = s[q0 + i];
    __syncthreads();
    for (int64_t i = 0; i < n; ++i) {
      const float v = chunk[i];
      rank += (v > sj || (v == sj && q0 + i < j));
    }
  }
  if (j < vis && rank < k) sel[r * ia.topk + rank] = static_cast<int32_t>(j);
}

}  // namespace

bool attention_fast_supported(const AttnArgs& a) {
  const int S = a.W + a.cslots();
  return a.D % 4 == 0 && a.D <= 4 * kAttnThreads && S <= kTile * kMaxTiles &&
         attention_shared_bytes(a) <= kSharedLimit && aligned16(a.kv) && aligned16(a.ring) &&
         aligned16(a.cmp);
}

void attention_fast(Exec& e, const Rows& rows, const AttnArgs& a, float* o) {
  const int64_t blocks = rows.n * a.H;
  if (blocks <= 0) return;
  const size_t shared = attention_shared_bytes(a);
  const int S = a.W + a.cslots();
  const unsigned g = static_cast<unsigned>(blocks);
  if (a.D <= kAttnThreads) {
    e.launch(attention_kernel<1>, g, kAttnThreads, shared, rows, a, S, o);
  } else if (a.D <= 2 * kAttnThreads) {
    e.launch(attention_kernel<2>, g, kAttnThreads, shared, rows, a, S, o);
  } else {
    e.launch(attention_kernel<4>, g, kAttnThreads, shared, rows, a, S, o);
  }
  e.note(cudaGetLastError());
}

bool indexer_fast_supported(const IndexerArgs& a) {
  return a.dim > 0 && a.heads > 0 && a.ratio > 0 && indexer_shared_bytes(a) <= kSharedLimit;
}

void indexer_topk_fast(Exec& e, const Rows& rows, const IndexerArgs& a, float* scores, int32_t* sel,
                       int32_t* cnt) {
  if (rows.n <= 0 || a.capacity <= 0) return;
  if (indexer_tc_supported(a)) {
    indexer_tc_scores(e, rows, a, scores);
  } else {
    const int64_t score_blocks = (a.capacity + kIdxEntries - 1) / kIdxEntries;
    const float sscale = 1.0f / sqrtf(static_cast<float>(a.dim));  // as the reference, on the host
    e.launch(indexer_scores_kernel, static_cast<unsigned>(rows.n * score_blocks), kIdxThreads,
             indexer_shared_bytes(a), rows, a, score_blocks, sscale, scores);
    e.note(cudaGetLastError());
  }
  if (topk_select_supported(a.topk, a.capacity)) {
    topk_select(e, rows, {.scores = scores, .stride = a.capacity, .ratio = a.ratio, .topk = a.topk},
                sel, cnt);
    return;
  }
  const int64_t rank_blocks = (a.capacity + kRankThreads - 1) / kRankThreads;
  e.launch(indexer_rank_kernel, static_cast<unsigned>(rows.n * rank_blocks), kRankThreads, 0, rows,
           a, rank_blocks, scores, sel, cnt);
  e.note(cudaGetLastError());
}

}  // namespace deepinfer::cuda
