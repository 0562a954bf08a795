// Tensor-core products through cuBLASLt for batches past the GEMV passes (prefill chunks, large
// decode batches): FP8 weights as shipped (e4m3 codes, 128×128 block scales) against activations
// quantized per 1×128 to real e4m3 bytes in the official rounding, and bf16 weights against fp32
// activations split into two bf16 halves (hi + lo, two products accumulated in fp32). One
// handle, workspace and activation scratch per Exec, created on first use; the algorithm of each
// shape is looked up once. Also the batch-invariant mode (cuda_model.h).
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_model.h"  // set_lt_gemm, set_batch_invariant
#include "backend/cuda/exec.cuh"
#include "backend/cuda/formats.cuh"

namespace deepinfer::cuda {

// y = x·Wᵀ with linear()'s contract (official numerics: x FP8-quantized per 1×128, y rounded to
// bf16) when the product is one cuBLASLt takes here (FP8 128×128 blocks with quantized inputs,
// or bf16 weights; aligned rows) and an algorithm exists: returns true. Otherwise returns false
// and leaves y alone for the caller's kernels.
bool lt_linear(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w, float* y,
               int64_t ldy, bool official);

// The rows the batch-invariant mode's one algorithm per shape is chosen for.
constexpr int64_t kInvariantReferenceRows = 512;

}  // namespace deepinfer::cuda
