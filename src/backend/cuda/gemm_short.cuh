// Short-output fp32 products at prefill row counts (gemm_short.cu): y[r, o] = x[r, :] · W[o, :]
// for fp32 weights of at most 32 outputs (the mHC mixes), a block per 16 rows, or per 32 rows
// with 4 × 4 outputs a thread from 4,096 rows on.
#pragma once

#include <cstdint>

#include "backend/cuda/exec.cuh"
#include "backend/cuda/formats.cuh"

namespace deepinfer::cuda {

bool short_out_supported(const DevWeight& w);
void gemm_short_out(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w, float* y,
                    int64_t ldy);

}  // namespace deepinfer::cuda
