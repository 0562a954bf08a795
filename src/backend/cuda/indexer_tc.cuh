// Tensor-core Lightning Indexer scores for the official numerics (indexer_tc.cu): a row's 64 index
// heads against 64 visible entries as one 64 × 64 bf16 mma tile over the head dim, then each
// score's weighted sum over heads in the reference's order. The official q rows and index keys are
// FP4 values with power-of-two scales (bf16-exact), so the dot products are exact up to their fp32
// summation order, the one difference from the reference body (a term's bf16 rounding can move by
// one ulp; CudaKernels.IndexerTcMatchesTheReference bounds the scores and the top-k overlap).
#pragma once

#include <cstdint>

#include "backend/cuda/attention.cuh"

namespace deepinfer::cuda {

// On unless DEEPINFER_CUDA_INDEXER_TC=0; the kernel checks switch it to compare.
bool indexer_tc();
void set_indexer_tc(bool on);
// Official numerics, 64 heads, head dim a multiple of 64, 16-byte aligned q and keys.
bool indexer_tc_supported(const IndexerArgs& a);
// scores[r, j] for j < capacity: the visible entries' scores, −inf past them (as the reference).
void indexer_tc_scores(Exec& e, const Rows& rows, const IndexerArgs& a, float* scores);

}  // namespace deepinfer::cuda
