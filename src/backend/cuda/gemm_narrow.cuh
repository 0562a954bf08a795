// Products with few output columns at decode batch sizes (gemm_narrow.cu): the mHC mixes (24
// fp32 outputs of 16,384 inputs) and other narrow weights past the GEMV passes, where one tile
// column or a block per 16 rows leaves most of the GPU idle. A block takes R rows × 32 outputs of
// one K slice, a cluster of blocks the whole row, summed in cluster-rank order through distributed
// shared memory (no scratch, graph-capturable, the same sums for a shape at every launch).
#pragma once

#include <cstdint>

#include "backend/cuda/exec.cuh"
#include "backend/cuda/formats.cuh"

namespace deepinfer::cuda {

// The most rows the narrow kernel is chosen for (decode batches; prefill keeps its kernels).
constexpr int64_t kNarrowMaxRows = 256;

// Whether gemm_narrow() can run this product (x 16-byte aligned rows, K a multiple of 8, the block
// scales' K blocks multiples of 8).
bool narrow_supported(const DevWeight& w, int64_t n, const float* x, int64_t ldx);
// Whether the forward should prefer it over the tiles for n rows (few outputs: their tile grid
// would not fill the GPU). DEEPINFER_CUDA_NARROW=0 turns it off.
bool narrow_preferred(const DevWeight& w, int64_t n);

// y[r, o] = x[r, :] · W[o, :] in fp32 with the weights' block scales (the reference body's
// product, another summation order), bf16-rounded when round_out.
void gemm_narrow(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w, float* y,
                 int64_t ldy, bool round_out);

}  // namespace deepinfer::cuda
