// Tensor-core Lightning Indexer scores (indexer_tc.cuh). A block per (row, 64-entry tile): the
// row's 64 head queries and the tile's index keys staged in shared memory as bf16 (exact in the
// official numerics) a 64-dim chunk at a time, four warps of 16 heads × 64 entries of m16n8k16
// tiles, then the reference's epilogue: each head's term bf16-rounded, the positive terms times
// the head weight bf16-rounded and summed over heads 0, 1, … in order, the sum bf16-rounded.
#include <algorithm>

#include "backend/cuda/indexer_tc.cuh"
#include "backend/cuda/mma_bf16.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kHeads = 64;    // index heads: four warps of 16
constexpr int kEntries = 64;  // entries per block
constexpr int kThreads = 128;
constexpr int kTermLd = kEntries + 1;

bool g_on = env_switch("DEEPINFER_CUDA_INDEXER_TC", true);

__global__ void __launch_bounds__(kThreads)
    indexer_tc_kernel(const Rows rw, const IndexerArgs ia, int64_t tiles_per_row,
                      float* __restrict__ scores) {
  pdl_begin();
  __shared__ __align__(16) __nv_bfloat16 qh[kHeads * kQkLd], kh[kEntries * kQkLd];
  __shared__ float terms[kHeads * kTermLd];
  __shared__ const float* key_rows[kEntries];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t r = blockIdx.x / tiles_per_row;
  const int64_t j0 = (blockIdx.x % tiles_per_row) * kEntries;
  const int64_t cap = ia.capacity, vis = (int64_t{rw.pos[r]} + 1) / ia.ratio;
  float* out = scores + r * cap;
  if (j0 >= vis) {
    for (int t = tid; t < kEntries; t += kThreads) {
      if (j0 + t < cap) out[j0 + t] = -INFINITY;
    }
    return;
  }
  const int64_t here = std::min<int64_t>(vis - j0, kEntries);
  if (tid < kEntries) {
    key_rows[tid] =
        tid < here ? ia.keys + entry_row(ia.pages, rw.seq[r], j0 + tid) * ia.dim : nullptr;
  }
  __syncthreads();
  const float* q = ia.q + r * kHeads * ia.dim;
  float acc[8][4] = {};
  qk_tile_product<false>(q, key_rows, ia.dim, qh, nullptr, kh, nullptr, acc);
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int head = warp * 16 + g + (i >= 2 ? 8 : 0), j = nt * 8 + 2 * t + (i & 1);
      terms[head * kTermLd + j] = bf16r(acc[nt][i]);
    }
  }
  __syncthreads();
  if (tid >= kEntries) return;
  const int64_t j = j0 + tid;
  if (j >= cap) return;
  if (j >= vis) {
    out[j] = -INFINITY;
    return;
  }
  const float* w = ia.w + r * kHeads;
  float s = 0.0f;
  for (int h = 0; h < kHeads; ++h) {
    const float term = terms[h * kTermLd + tid];
    if (term > 0) s += bf16r(term * w[h]);
  }
  out[j] = bf16r(s);
}

}  // namespace

bool indexer_tc() { return g_on; }
void set_indexer_tc(bool on) { g_on = on; }

bool indexer_tc_supported(const IndexerArgs& a) {
  return g_on && a.official && a.heads == kHeads && a.dim > 0 && a.dim % kQkChunk == 0 &&
         a.ratio > 0 && aligned16(a.q) && aligned16(a.keys);
}

void indexer_tc_scores(Exec& e, const Rows& rows, const IndexerArgs& a, float* scores) {
  if (rows.n <= 0 || a.capacity <= 0) return;
  const int64_t tiles = (a.capacity + kEntries - 1) / kEntries;
  e.launch(indexer_tc_kernel, static_cast<unsigned>(rows.n * tiles), kThreads, 0, rows, a, tiles,
           scores);
  e.note(cudaGetLastError());
}

}  // namespace deepinfer::cuda
