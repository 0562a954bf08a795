// One view over a weight matrix in any storage format, and the linear kernel entry that dispatches
// on the format: y[n, out] = x[n, in] · Wᵀ with fp32 activations. F32 and BF16 are built in; the
// quantized formats (FP8 128×128 blocks, FP4 e2m1 ×32) plug in through register_linear_kernel().
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepinfer::cpu {

class ThreadPool;

enum class WeightFormat {
  F32,               // float [out, in]
  BF16,              // uint16 bf16 bits [out, in]
  FP8_E4M3_BLOCK,    // uint8 e4m3 [out, in], one scale per block_out × block_in block
  FP4_E2M1_BLOCK32,  // uint8 [out, in/2] (element 2k low nibble, 2k+1 high), one scale per 1×32
};

enum class ScaleFormat {
  None,
  UE8M0,  // uint8 bare exponent: 2^(e-127)
  F32,    // float
};

// A non-owning view; the storage usually lives in a memory-mapped checkpoint.
struct WeightView {
  WeightFormat format = WeightFormat::F32;
  const void* data = nullptr;
  int64_t out = 0;         // rows (output features)
  int64_t in = 0;          // columns (input features)
  int64_t row_stride = 0;  // elements between consecutive rows (0 = in); FP4: still in elements
  // Block scales (quantized formats only).
  const void* scale = nullptr;
  ScaleFormat scale_format = ScaleFormat::None;
  int block_out = 0;         // FP8: 128; FP4: 1
  int block_in = 0;          // FP8: 128; FP4: 32
  int64_t scale_stride = 0;  // scale elements between consecutive scale rows
  // Official numerics: FP8-quantize x per 1×128 before an FP8/FP4 product (the reference's
  // linear()); false for wo_a, which the reference dequantizes and applies as a bf16 einsum.
  bool quantize_input = true;

  int64_t stride() const { return row_stride ? row_stride : in; }
  // Rows [r0, r0+n) as a view of the same storage (r0 a multiple of block_out for FP8).
  WeightView rows(int64_t r0, int64_t n) const;
};

// y[n_rows, w.out] = x[n_rows, w.in] · Wᵀ. x and y are dense fp32 row-major. pool may be null
// (single thread). The caller checks linear_supported(w.format) once, at load time.
void linear(const float* x, int64_t n_rows, const WeightView& w, float* y, ThreadPool* pool);

// A kernel computes output columns [o0, o1) of y (y row stride = w.out) for all n_rows rows; it is
// called concurrently for disjoint column ranges, so it must not allocate or share scratch.
using LinearRangeFn = void (*)(const float* x, int64_t n_rows, const WeightView& w, float* y,
                               int64_t o0, int64_t o1);
void register_linear_kernel(WeightFormat format, LinearRangeFn fn);
bool linear_supported(WeightFormat format);

// Row `r` of W as fp32 (embedding lookups, prefill blocks, tests). Quantized formats register
// their row decoder; without one the row reads as zeros (checked at load time).
void dequantize_row(const WeightView& w, int64_t r, float* out);
using DequantizeRowFn = void (*)(const WeightView& w, int64_t r, float* out);
void register_dequantize_row(WeightFormat format, DequantizeRowFn fn);

const char* to_string(WeightFormat format);

}  // namespace deepinfer::cpu
