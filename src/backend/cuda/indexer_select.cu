// The indexers' top-k on the device by radix select (fast_ops.cuh): a block per row finds the
// k-th largest score by four 8-bit histogram passes over the row, takes every entry above it and
// the lowest-id entries equal to it — the references' rank rule (higher score, then lower id), so
// the same k entries — and sorts them by that rank (V4) or by id (V4.1). Work per row is
// O(visible) rather than the rank bodies' O(visible²), which is what long contexts need.
#include <algorithm>

#include "backend/cuda/block_select.cuh"
#include "backend/cuda/fast_ops.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kSelThreads = 512;
constexpr int kSelMaxK = 2048;    // the sort buffer (16 KB of shared memory)
constexpr int kSelCached = 4096;  // rows up to this many entries keep their keys in shared memory
// Rank mode: a thread group per entry counts the entries ranked above it.
constexpr int kRankLanes = 8;                           // threads an entry
constexpr int kRankEntries = kSelThreads / kRankLanes;  // entries a block
constexpr int kRankParts = kSelCached / kRankEntries;   // blocks a row
constexpr int kRankMaxRows = 16;                        // decode-sized launches only

// A block per (row, part). Rows of at most kSelCached visible entries in rank mode (parts > 1,
// V4's rank order): every part reads the row's keys, and the thread group of entry i counts the
// entries above it (higher key, or the same key and a lower id; the counts are exact in any
// order) and writes i at that rank if it is below k — the radix select's entries in its order,
// with vis² / (kRankLanes · parts) comparisons a thread in place of a chain of passes over one
// block. Otherwise part 0 runs the radix select and the other parts return.
__global__ void __launch_bounds__(kSelThreads)
    topk_select_kernel(const Rows rw, const TopkArgs ta, int32_t* __restrict__ sel,
                       int32_t* __restrict__ cnt, bool fast, int parts) {
  pdl_begin();
  __shared__ BlockSelectShared<kSelThreads> sh;
  __shared__ unsigned long long picked[kSelMaxK];
  __shared__ uint32_t keys[kSelCached];
  const int tid = threadIdx.x;
  const int64_t r = blockIdx.x / parts;
  const int part = static_cast<int>(blockIdx.x % parts);
  const int64_t vis = (int64_t{rw.pos[r]} + 1) / ta.ratio;
  const int k = static_cast<int>(vis < ta.topk ? vis : ta.topk);
  const bool rank_mode = parts > 1 && vis <= kSelCached;
  if (part > 0 && (!rank_mode || int64_t{part} * kRankEntries >= vis)) return;
  int32_t* out = sel + r * ta.topk;
  if (part == 0) {
    if (cnt && tid == 0) cnt[r] = k;
    if (ta.pad)
      for (int i = k + tid; i < ta.topk; i += kSelThreads) out[i] = -1;
  }
  if (k == 0) return;
  const float* s = ta.scores + r * ta.stride;
  const bool cached = rank_mode || (fast && vis <= kSelCached);
  if (cached) {
    // The row's keys read once (every load in flight) for the rank counts or the select's five
    // passes over them.
    for (int64_t j = tid; j < vis; j += kSelThreads) keys[j] = order_key(s[j]);
    __syncthreads();
  }
  if (rank_mode) {
    const int i = part * kRankEntries + tid / kRankLanes, lane = tid % kRankLanes;
    const uint32_t ki = i < vis ? keys[i] : 0u;
    int above = 0;
    for (int j = lane; j < vis; j += kRankLanes) {
      const uint32_t kj = keys[j];
      above += kj > ki || (kj == ki && j < i);
    }
#pragma unroll
    for (int off = kRankLanes / 2; off > 0; off >>= 1)
      above += __shfl_xor_sync(0xffffffffu, above, off);
    if (lane == 0 && i < vis && above < k) out[above] = i;
    return;
  }
  if (cached) {
    block_select<kSelThreads>(
        vis, k, ta.by_id, [](int64_t j) { return keys[j]; }, sh, picked, true);
  } else {
    block_select<kSelThreads>(
        vis, k, ta.by_id, [s](int64_t j) { return order_key(s[j]); }, sh, picked, fast);
  }
  for (int i = tid; i < k; i += kSelThreads) out[i] = static_cast<int32_t>(picked[i] & 0xffffffffu);
}

// The shuffle sort and the keys in shared memory (DEEPINFER_CUDA_TOPK_FAST=0: the earlier body,
// for A/B runs; the same entries either way).
const bool g_topk_fast = env_switch("DEEPINFER_CUDA_TOPK_FAST", true);
// Rank mode for decode-sized launches, on by default (H100, scores + top-k of one row 0.025 →
// 0.020 ms against the radix select); DEEPINFER_CUDA_TOPK_RANK=0 keeps the radix select.
bool g_topk_rank = env_switch("DEEPINFER_CUDA_TOPK_RANK", true);

}  // namespace

bool topk_select_supported(int topk, int64_t stride) {
  return topk > 0 && topk <= kSelMaxK && stride < (int64_t{1} << 31);
}

bool topk_rank() { return g_topk_rank; }
void set_topk_rank(bool on) { g_topk_rank = on; }

void topk_select(Exec& e, const Rows& rows, const TopkArgs& a, int32_t* sel, int32_t* cnt) {
  if (rows.n <= 0) return;
  const bool rank = g_topk_rank && g_topk_fast && !a.by_id && rows.n <= kRankMaxRows;
  const int parts = rank
                        ? std::clamp(static_cast<int>((a.stride + kRankEntries - 1) / kRankEntries),
                                     1, kRankParts)
                        : 1;
  e.launch(topk_select_kernel, static_cast<unsigned>(rows.n * parts), kSelThreads, 0, rows, a, sel,
           cnt, g_topk_fast, parts);
  e.note(cudaGetLastError());
}

}  // namespace deepinfer::cuda
