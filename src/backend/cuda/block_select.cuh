// Block-wide top-k by radix select, for kernels that give a whole block to one row (the indexers'
// top-k, sampling's top-k): the k-th largest key by four 8-bit histogram passes, every entry above
// it and the lowest-id entries equal to it (rank rule: larger key, then lower id), then a bitonic
// sort of those k — by rank, or by id. O(n) per row plus the sort of k.
#pragma once

#include <cstdint>

namespace deepinfer::cuda {

// An order-preserving map of a float to uint32 (larger float, larger key). Both zeros map to one
// key because the rank rules compare them as equal. Key 0 is below every float's key: callers use
// it for entries that may not be picked.
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t b = v == 0.0f ? 0u : __float_as_uint(v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Shared memory one block_select call needs; picked holds at least the next power of two ≥ k.
template <int kThreads>
struct BlockSelectShared {
  static_assert(kThreads >= 256 && kThreads % 32 == 0, "a thread per histogram bin");
  uint32_t hist[256];
  uint32_t warp_eq[kThreads / 32];
  uint32_t prefix, need, greater;
};

// Sorts v[0, m) ascending (m a power of two, entries distinct bar equal padding) by a bitonic
// network. Up to m = 2 · kThreads each thread holds entries 2t and 2t + 1 for the strides ≤ 32 of a
// size (warp shuffles, one barrier per size) and only the larger strides go through shared memory
// (a barrier each): 10 barriers for m = 512 instead of 45; !shuffles: every stride through shared
// memory. Every thread of the block must call it.
template <int kThreads>
__device__ void block_bitonic_sort(unsigned long long* v, int m, bool shuffles) {
  const int tid = threadIdx.x;
  const auto exchange = [v](int lo, int hi, bool ascending) {
    const unsigned long long a = v[lo], b = v[hi];
    if ((a > b) == ascending) {
      v[lo] = b;
      v[hi] = a;
    }
  };
  if (!shuffles || m > 2 * kThreads) {
    for (int size = 2; size <= m; size <<= 1) {
      for (int stride = size / 2; stride > 0; stride >>= 1) {
        for (int i = tid; i < m / 2; i += kThreads) {
          const int lo = 2 * stride * (i / stride) + i % stride;
          exchange(lo, lo + stride, (lo & size) == 0);
        }
        __syncthreads();
      }
    }
    return;
  }
  const bool holds = 2 * tid < m;
  const bool in_pairs = tid < m / 2;
  for (int size = 2; size <= m; size <<= 1) {
    int stride = size / 2;
    for (; stride >= 64; stride >>= 1) {
      if (in_pairs) {
        const int lo = 2 * stride * (tid / stride) + tid % stride;
        exchange(lo, lo + stride, (lo & size) == 0);
      }
      __syncthreads();
    }
    unsigned long long a = holds ? v[2 * tid] : 0ull, b = holds ? v[2 * tid + 1] : 0ull;
    const bool ascending = ((2 * tid) & size) == 0;  // both entries' run
    for (; stride >= 2; stride >>= 1) {
      const int x = stride / 2;  // the partner thread is tid ^ x, in the same warp
      const unsigned long long pa = __shfl_xor_sync(0xffffffffu, a, x);
      const unsigned long long pb = __shfl_xor_sync(0xffffffffu, b, x);
      const bool keep_min = ((tid & x) == 0) == ascending;
      a = keep_min ? (pa < a ? pa : a) : (pa > a ? pa : a);
      b = keep_min ? (pb < b ? pb : b) : (pb > b ? pb : b);
    }
    if ((a > b) == ascending) {
      const unsigned long long t = a;
      a = b;
      b = t;
    }
    if (holds) {
      v[2 * tid] = a;
      v[2 * tid + 1] = b;
    }
    __syncthreads();
  }
}

// The top k (1 ≤ k ≤ n) of entries 0 … n−1 with keys key_of(j), into picked[0, k): sorted by
// (key descending, id ascending) as (~key << 32 | id), or by_id as id. Every thread of the block
// must call it (it synchronises). shuffle_sort: block_bitonic_sort's shuffles.
template <int kThreads, class KeyOf>
__device__ void block_select(int64_t n, int k, bool by_id, KeyOf key_of,
                             BlockSelectShared<kThreads>& sh, unsigned long long* picked,
                             bool shuffle_sort = true) {
  constexpr int kWarps = kThreads / 32;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  // threshold: the k-th largest key; need: how many entries equal to it the selection takes.
  uint32_t threshold = 0, need = static_cast<uint32_t>(k);
  if (k < n) {
    uint32_t prefix = 0, mask = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
      for (int i = tid; i < 256; i += kThreads) sh.hist[i] = 0;
      __syncthreads();
      for (int64_t j = tid; j < n; j += kThreads) {
        const uint32_t key = key_of(j);
        if ((key & mask) == prefix) atomicAdd(&sh.hist[(key >> shift) & 255u], 1u);
      }
      __syncthreads();
      // The digit d: the largest d ≥ 1 with at least `need` keys at or above it, else 0; above:
      // the keys above it. Thread t < 256 holds bin 255 − t, so an inclusive scan over t gives
      // at_or_above(d); one thread meets the condition (a parallel form of the serial walk down
      // from 255, which took four 256-step dependent chains a row).
      const int d = 255 - tid;
      uint32_t count = 0, at_or_above = 0;
      if (tid < 256) {  // whole warps
        count = sh.hist[d];
        at_or_above = count;
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
          const uint32_t v = __shfl_up_sync(0xffffffffu, at_or_above, off);
          if (lane >= off) at_or_above += v;
        }
        if (lane == 31) sh.warp_eq[warp] = at_or_above;
      }
      __syncthreads();
      if (tid < 256) {
        for (int w = 0; w < warp; ++w) at_or_above += sh.warp_eq[w];
        const uint32_t above = at_or_above - count;
        if (above < need && (d == 0 || at_or_above >= need)) {
          sh.prefix = prefix | (static_cast<uint32_t>(d) << shift);
          sh.need = need - above;
        }
      }
      __syncthreads();
      prefix = sh.prefix;
      need = sh.need;
      mask |= 255u << shift;
      __syncthreads();  // prefix / need are rewritten by the next pass
    }
    threshold = prefix;
  }
  // Collect: every key above the threshold (any order: sorted below), and the first `need` keys
  // equal to it in id order (a block-wide running count over tiles of ids).
  if (tid == 0) sh.greater = 0;
  __syncthreads();
  uint32_t eq_before = 0;  // equal keys in earlier tiles
  for (int64_t j0 = 0; j0 < n; j0 += kThreads) {
    const int64_t j = j0 + tid;
    const uint32_t key = j < n ? key_of(j) : 0u;
    const bool all = k == n && j < n;
    const bool greater = j < n && key > threshold && k < n;
    const bool equal = j < n && key == threshold && k < n;
    const unsigned ballot = __ballot_sync(0xffffffffu, equal);
    if (lane == 0) sh.warp_eq[warp] = static_cast<uint32_t>(__popc(ballot));
    __syncthreads();
    uint32_t rank = eq_before + static_cast<uint32_t>(__popc(ballot & ((1u << lane) - 1u)));
    uint32_t tile_eq = 0;
    for (int w = 0; w < kWarps; ++w) {
      if (w < warp) rank += sh.warp_eq[w];
      tile_eq += sh.warp_eq[w];
    }
    const unsigned long long id = static_cast<uint32_t>(j);
    const auto entry = by_id ? id : (static_cast<unsigned long long>(~key) << 32) | id;
    if (greater || all) {
      picked[atomicAdd(&sh.greater, 1u)] = entry;
    } else if (equal && rank < need) {
      picked[static_cast<uint32_t>(k) - need + rank] = entry;  // after the k − need greater ones
    }
    eq_before += tile_eq;
    __syncthreads();  // warp_eq is rewritten by the next tile
  }
  // Sorted, padded to a power of two with the largest value.
  int m = 1;
  while (m < k) m <<= 1;
  for (int i = k + tid; i < m; i += kThreads) picked[i] = ~0ull;
  __syncthreads();
  block_bitonic_sort<kThreads>(picked, m, shuffle_sort);
}

}  // namespace deepinfer::cuda
