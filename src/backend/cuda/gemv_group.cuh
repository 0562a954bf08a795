// Several split-row GEMV products in one launch (gemv.cu): the decode step's short
// products of the normed hidden row (q and kv down projections, compressor and indexer heads)
// are each a few hundred blocks or fewer, so alone they leave the GPU half idle and pay a launch
// each. Each column's sum is the one the separate gemv() computes, so the outputs are the same
// bits — except in a group of official FP8 products only (wo_a's eight groups), which runs as
// one tensor-core launch (gemv_mma.cuh), its sums in another order.
#pragma once

#include <cstdint>

#include "backend/cuda/exec.cuh"
#include "backend/cuda/formats.cuh"

namespace deepinfer::cuda {

constexpr int kMaxGemvJobs = 8;

struct GemvJob {
  const DevWeight* w = nullptr;
  const float* x = nullptr;  // this product's input rows, or null: the group's x
  float* y = nullptr;
  int64_t ldy = 0;
  bool round_out = false;
  float* yq = nullptr;  // or null: y's FP8 copy as MmaGemvJob::yq, where the group answers true
};

// Whether gemv() would run w at n rows of x on the split-row kernel (so the group may take it).
bool gemv_split_row(const DevWeight& w, int64_t n, const float* x, int64_t ldx);
// jobs[0, count) (count ≤ kMaxGemvJobs, each gemv_split_row; their inputs x or their own, all of
// row stride ldx): one launch. True where it also wrote every job's yq (the tensor-core GEMV
// path, jobs of whole 128-row tiles), else none of them.
bool gemv_split_row_group(Exec& e, const float* x, int64_t ldx, int64_t n, const GemvJob* jobs,
                          int count);

}  // namespace deepinfer::cuda
