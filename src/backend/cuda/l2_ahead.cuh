// Weights brought into L2 ahead of their products. A decode step at GEMV sizes spends about a
// third of its time in small dependent launches (norms, RoPE, attention over one row, routing)
// while HBM sits idle; a kernel on a stream of its own can ask for the next products' bytes then
// (cp.async.bulk.prefetch.L2: no registers, no waiting), so those products read L2 instead.
// Numerics are untouched: only where bytes are cached changes.
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_model.h"
#include "backend/cuda/exec.cuh"
#include "backend/cuda/formats.cuh"

namespace deepinfer::cuda {

// The points of a decode step that prefetch (CudaModel::Impl::l2_ahead): l2_ahead_points()'s bits.
enum L2AheadPoint : unsigned {
  kAheadAttention = 1,  // at an attention sublayer's start: wq_a, wkv, the compressors', wq_b
  kAheadOutput = 2,     // after wq_b: wo_a, wo_b, while attention runs
  kAheadFfn = 4,        // at an FFN sublayer's start: the gate and the shared expert
  kAheadNextLayer = 8,  // after the routing: the next layer's attention weights, beside the experts
};
// The most bytes one point asks for: DEEPINFER_CUDA_L2_AHEAD_MB, else three quarters of l2_bytes.
int64_t l2_ahead_budget(int64_t l2_bytes);

// Byte ranges to bring into L2, in order, up to a budget.
struct L2Spans {
  static constexpr int kMax = 16;
  const uint8_t* p[kMax] = {};
  int64_t bytes[kMax] = {};
  int count = 0;
  int64_t total = 0;
  int64_t budget = 0;

  // [p, p + bytes) trimmed to whole 16-byte words inside it (what the prefetch takes) and to
  // what is left of the budget.
  void add(const void* p, int64_t bytes);
  // The rows w covers and their scales.
  void add(const DevWeight& w);
  bool full() const { return count == kMax || total >= budget; }
};

// One launch on e's stream that asks for every span; returns at once on the device.
void l2_prefetch(Exec& e, const L2Spans& spans);

}  // namespace deepinfer::cuda
