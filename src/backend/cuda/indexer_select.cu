// The indexers' top-k on the device by radix select (fast_ops.cuh): a block per row finds the
// k-th largest score by four 8-bit histogram passes over the row, takes every entry above it and
// the lowest-id entries equal to it — the references' rank rule (higher score, then lower id), so
// the same k entries — and sorts them by that rank (V4) or by id (V4.1). Work per row is
// O(visible) rather than the rank bodies' O(visible²), which is what long contexts need.
#include "backend/cuda/block_select.cuh"
#include "backend/cuda/fast_ops.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kSelThreads = 512;
constexpr int kSelMaxK = 2048;    // the sort buffer (16 KB of shared memory)
constexpr int kSelCached = 4096;  // rows up to this many entries keep their keys in shared memory

__global__ void __launch_bounds__(kSelThreads)
    topk_select_kernel(const Rows rw, const TopkArgs ta, int32_t* __restrict__ sel,
                       int32_t* __restrict__ cnt, bool fast) {
  pdl_begin();
  __shared__ BlockSelectShared<kSelThreads> sh;
  __shared__ unsigned long long picked[kSelMaxK];
  const int tid = threadIdx.x;
  const int64_t r = blockIdx.x;
  const int64_t vis = (int64_t{rw.pos[r]} + 1) / ta.ratio;
  const int k = static_cast<int>(vis < ta.topk ? vis : ta.topk);
  int32_t* out = sel + r * ta.topk;
  if (cnt && tid == 0) cnt[r] = k;
  if (ta.pad)
    for (int i = k + tid; i < ta.topk; i += kSelThreads) out[i] = -1;
  if (k == 0) return;
  const float* s = ta.scores + r * ta.stride;
  if (fast && vis <= kSelCached) {
    // The row's keys read once (every load in flight) for the select's five passes over them.
    __shared__ uint32_t keys[kSelCached];
    for (int64_t j = tid; j < vis; j += kSelThreads) keys[j] = order_key(s[j]);
    __syncthreads();
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

}  // namespace

bool topk_select_supported(int topk, int64_t stride) {
  return topk > 0 && topk <= kSelMaxK && stride < (int64_t{1} << 31);
}

void topk_select(Exec& e, const Rows& rows, const TopkArgs& a, int32_t* sel, int32_t* cnt) {
  if (rows.n <= 0) return;
  e.launch(topk_select_kernel, static_cast<unsigned>(rows.n), kSelThreads, 0, rows, a, sel, cnt,
           g_topk_fast);
  e.note(cudaGetLastError());
}

}  // namespace deepinfer::cuda
