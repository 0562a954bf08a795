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

// How the products the WMMA tiles take (gemm_tc: official numerics, quantized weights that
// lt_linear declines — wo_a's bf16-rounded inputs, FP8 plans that failed the check, FP4) run past
// the GEMV passes: on the tiles (Off), or on cuBLASLt with the weight view dequantized to bf16
// into scratch at each launch (PerLaunch, the default) or once into a kept bf16 copy (Kept: twice
// the FP8 bytes of those views on top; the decode GEMVs still read the FP8 weights).
// DEEPINFER_CUDA_LT_DEQUANT=0 / 1 / 2.
enum class LtDequant : int { Off = 0, PerLaunch = 1, Kept = 2 };
LtDequant lt_dequant();

// gemm_tc's product on cuBLASLt: w's view dequantized to bf16 (e4m3 / e2m1 times a power-of-two
// scale: exact), x rounded to bf16 (the caller's inputs are bf16-exact), one bf16 product with
// fp32 accumulation, y rounded to bf16. False (y untouched) when the shape or the state does not
// allow it; the caller then runs the tiles.
bool lt_dequant_linear(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w,
                       float* y, int64_t ldy, LtDequant mode);

// The rows the batch-invariant mode's one algorithm per shape is chosen for.
constexpr int64_t kInvariantReferenceRows = 512;

}  // namespace deepinfer::cuda
