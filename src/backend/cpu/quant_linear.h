// Linear kernels for the quantized weight formats, dequantizing on the fly one weight row at a
// time (never a full fp32 copy): FP8 e4m3 with 128×128 block scales (UE8M0 or F32) and FP4 e2m1
// with per-32 UE8M0 scales. With official activations (DeepSeek's fp8_gemm / fp4_gemm) x is first
// FP8-quantized per 1×128 (UE8M0), K is summed in blocks (128 for FP8, 32 for FP4) whose partials
// are added in K order in fp32, and the output is rounded to bf16. From 12 rows on (prefill),
// blocks of 64 weight rows are dequantized and multiplied with OpenBLAS sgemm: the same products,
// summed in another fp32 order.
#pragma once

#include <cstdint>

#include "backend/cpu/weight_view.h"

namespace deepinfer::cpu {

enum class QuantActivations {
  Fp32,      // x used as given, fp32 output (dequantize-and-multiply)
  Official,  // x FP8-quantized per 128 first, block partial sums, bf16 output
};

// Output columns [o0, o1) of y[n_rows, w.out] = x · Wᵀ for an FP8 or FP4 view. Scratch lives in
// per-thread buffers that grow once; safe to call concurrently for disjoint ranges.
void quant_linear_range(const float* x, int64_t n_rows, const WeightView& w, float* y, int64_t o0,
                        int64_t o1, QuantActivations mode);

// Row r of an FP8 / FP4 view as fp32 (scales applied). NaN codes decode as NaN.
void quant_dequantize_row(const WeightView& w, int64_t r, float* out);

// Installs the FP8 / FP4 kernels and row decoders into linear()'s dispatch table. The FP8/FP4
// range kernels use `mode` (a quantized checkpoint runs the official numerics). Idempotent.
void register_quant_kernels(QuantActivations mode);

}  // namespace deepinfer::cpu
