// The official softmax's tile recurrence (attention.cu's reference), shared by the one-block
// attention kernel (attention_fast.cu) and the split-KV pass 2 (attention_split.cu), which differ
// only in where a slot's logit lies.
#pragma once

#include <cmath>
#include <cstdint>

namespace deepinfer::cuda {

// The tiles' shared-memory state: the running max through each tile, each tile's rescale of
// the earlier sum, its sum of exp(l − max), whether it has a visible slot, and its factor
// Π_{T' > T} rescale_T' / denom.
struct OfficialTiles {
  float* tile_max;
  float* rescale;
  float* psum;
  float* later;
  int* tile_any;
};

// Runs the recurrence over slots t < n_slots of kTile each, a block of kBlock threads (all of
// them call it). at(t) is the index of slot t's logit in pr, negative for a hidden slot. Ends
// with a barrier; a slot's weight is then bf16r(expf(pr[at(t)] − tile_max[T])) · later[T].
template <int kBlock, int kTile, class SlotAt>
__device__ void official_tile_softmax(const float* pr, int64_t n_slots, float sink, SlotAt at,
                                      OfficialTiles w) {
  const int tid = threadIdx.x;
  const int n_tiles = static_cast<int>((n_slots + kTile - 1) / kTile);
  for (int T = tid; T < n_tiles; T += kBlock) {  // each tile's max
    float tm = -INFINITY;
    int any = 0;
    for (int64_t t = T * kTile; t < n_slots && t < (T + 1) * kTile; ++t) {
      const int64_t s = at(t);
      if (s < 0) continue;
      any = 1;
      tm = fmaxf(tm, pr[s]);
    }
    w.tile_max[T] = tm;
    w.tile_any[T] = any;
  }
  __syncthreads();
  float run_max = -INFINITY;  // thread 0's
  if (tid == 0) {             // the running max, tile by tile
    for (int T = 0; T < n_tiles; ++T) {
      if (!w.tile_any[T]) {
        w.tile_max[T] = run_max;
        w.rescale[T] = 1.0f;
        continue;
      }
      const float new_max = fmaxf(run_max, w.tile_max[T]);
      w.rescale[T] = expf(run_max - new_max);
      w.tile_max[T] = new_max;
      run_max = new_max;
    }
  }
  __syncthreads();
  for (int T = tid; T < n_tiles; T += kBlock) {  // each tile's sum, in slot order
    float sum = 0.0f;
    for (int64_t t = T * kTile; t < n_slots && t < (T + 1) * kTile; ++t) {
      const int64_t s = at(t);
      if (s >= 0) sum += expf(pr[s] - w.tile_max[T]);
    }
    w.psum[T] = sum;
  }
  __syncthreads();
  if (tid == 0) {  // the denominator, then each tile's factor Π_{T' > T} rescale_T' / denom
    float denom = 0.0f;
    for (int T = 0; T < n_tiles; ++T) {
      if (w.tile_any[T]) denom = denom * w.rescale[T] + w.psum[T];
    }
    denom += expf(sink - run_max);
    float f = 1.0f / denom;
    for (int T = n_tiles - 1; T >= 0; --T) {
      w.later[T] = f;
      f *= w.rescale[T];
    }
  }
  __syncthreads();
}

}  // namespace deepinfer::cuda
