// The indexers' top-k on the device by radix select (fast_ops.cuh): a block per row finds the
// k-th largest score by four 8-bit histogram passes over the row, takes every entry above it and
// the lowest-id entries equal to it — the references' rank rule (higher score, then lower id), so
// the same k entries — and sorts them by that rank (V4) or by id (V4.1). Work per row is
// O(visible) rather than the rank bodies' O(visible²), which is what long contexts need.
#include "backend/cuda/fast_ops.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kSelThreads = 512, kSelWarps = kSelThreads / 32;
constexpr int kSelMaxK = 2048;  // the sort buffer (16 KB of shared memory)

// An order-preserving map of a float to uint32 (larger float, larger key). Both zeros map to one
// key because the reference compares them as equal.
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t b = v == 0.0f ? 0u : __float_as_uint(v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__global__ void __launch_bounds__(kSelThreads)
    topk_select_kernel(const Rows rw, const TopkArgs ta, int32_t* __restrict__ sel,
                       int32_t* __restrict__ cnt) {
  __shared__ uint32_t hist[256];
  __shared__ uint32_t warp_eq[kSelWarps];
  __shared__ unsigned long long picked[kSelMaxK];
  __shared__ uint32_t s_prefix, s_need, s_greater;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int64_t r = blockIdx.x;
  const int64_t vis = (int64_t{rw.pos[r]} + 1) / ta.ratio;
  const int k = static_cast<int>(vis < ta.topk ? vis : ta.topk);
  int32_t* out = sel + r * ta.topk;
  if (cnt && tid == 0) cnt[r] = k;
  if (ta.pad)
    for (int i = k + tid; i < ta.topk; i += kSelThreads) out[i] = -1;
  if (k == 0) return;
  const float* s = ta.scores + r * ta.stride;

  // threshold: the k-th largest key; need: how many entries equal to it the selection takes.
  uint32_t threshold = 0, need = static_cast<uint32_t>(k);
  if (k < vis) {
    uint32_t prefix = 0, mask = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int i = tid; i < 256; i += kSelThreads) hist[i] = 0;
      __syncthreads();
      for (int64_t j = tid; j < vis; j += kSelThreads) {
        const uint32_t key = order_key(s[j]);
        if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
      }
      __syncthreads();
      if (tid == 0) {
        uint32_t above = 0;
        int d = 255;
        for (; d > 0 && above + hist[d] < need; --d) above += hist[d];
        s_prefix = prefix | (static_cast<uint32_t>(d) << shift);
        s_need = need - above;
      }
      __syncthreads();
      prefix = s_prefix;
      need = s_need;
      mask |= 255u << shift;
      __syncthreads();  // s_prefix / s_need are rewritten by the next pass
    }
    threshold = prefix;
  }

  // Collect: every key above the threshold (any slot order: they are sorted below), and the first
  // `need` keys equal to it in id order (a block-wide running count over tiles of ids).
  if (tid == 0) s_greater = 0;
  __syncthreads();
  uint32_t eq_before = 0;  // equal keys in earlier tiles
  for (int64_t j0 = 0; j0 < vis; j0 += kSelThreads) {
    const int64_t j = j0 + tid;
    const uint32_t key = j < vis ? order_key(s[j]) : 0u;
    const bool greater = j < vis && key > threshold;
    const bool equal = j < vis && key == threshold && k < vis;
    const unsigned ballot = __ballot_sync(0xffffffffu, equal);
    if (lane == 0) warp_eq[warp] = static_cast<uint32_t>(__popc(ballot));
    __syncthreads();
    uint32_t rank = eq_before + static_cast<uint32_t>(__popc(ballot & ((1u << lane) - 1u)));
    uint32_t tile_eq = 0;
    for (int w = 0; w < kSelWarps; ++w) {
      if (w < warp) rank += warp_eq[w];
      tile_eq += warp_eq[w];
    }
    const unsigned long long id = static_cast<uint32_t>(j);
    const auto entry = ta.by_id ? id : (static_cast<unsigned long long>(~key) << 32) | id;
    if (greater || (k == vis && j < vis)) {
      picked[atomicAdd(&s_greater, 1u)] = entry;
    } else if (equal && rank < need) {
      picked[static_cast<uint32_t>(k) - need + rank] = entry;  // after the k − need greater ones
    }
    eq_before += tile_eq;
    __syncthreads();  // warp_eq is rewritten by the next tile
  }

  // Bitonic sort of the k picked entries, padded to a power of two with the largest value.
  int n = 1;
  while (n < k) n <<= 1;
  for (int i = k + tid; i < n; i += kSelThreads) picked[i] = ~0ull;
  __syncthreads();
  for (int size = 2; size <= n; size <<= 1) {
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      for (int i = tid; i < n / 2; i += kSelThreads) {
        const int lo = 2 * stride * (i / stride) + i % stride, hi = lo + stride;
        const bool ascending = (lo & size) == 0;
        const unsigned long long a = picked[lo], b = picked[hi];
        if ((a > b) == ascending) {
          picked[lo] = b;
          picked[hi] = a;
        }
      }
      __syncthreads();
    }
  }
  for (int i = tid; i < k; i += kSelThreads) out[i] = static_cast<int32_t>(picked[i] & 0xffffffffu);
}

}  // namespace

bool topk_select_supported(int topk, int64_t stride) {
  return topk > 0 && topk <= kSelMaxK && stride < (int64_t{1} << 31);
}

void topk_select(Exec& e, const Rows& rows, const TopkArgs& a, int32_t* sel, int32_t* cnt) {
  if (rows.n <= 0) return;
  topk_select_kernel<<<static_cast<unsigned>(rows.n), kSelThreads, 0, e.stream>>>(rows, a, sel,
                                                                                  cnt);
  e.note(cudaGetLastError());
}

}  // namespace deepinfer::cuda
