// Fast device-only matrix kernels (never emulated; the reference bodies in ops.cu define what
// they compute): a warp per output column streaming the packed weight row once with 16/8/4-byte
// loads and the block scales applied in registers, for up to 8 input rows per pass (decode
// batches up to gemv_max_rows() rows take several passes), or a block per column splitting the
// row for products with few output columns and long rows; a shared-memory tiled GEMM for more
// rows where cuBLASLt (gemm_lt.cuh, chosen first by ops.cu's linear) declines; the routed-expert
// variant.
#pragma once

#include <cstdint>

#include "backend/cuda/exec.cuh"
#include "backend/cuda/formats.cuh"
#include "backend/cuda/ops.cuh"

namespace deepinfer::cuda {

// Whether gemv() handles this product (alignment and shape); the caller falls back otherwise.
bool gemv_supported(const DevWeight& w, int64_t n);
void gemv(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w, float* y,
          int64_t ldy, bool round_out);
// The largest batch gemv() runs as GEMV passes (8: one pass; env DEEPINFER_CUDA_GEMV_MAX_ROWS).
int gemv_max_rows();
// The kernel reports time both sides of the crossover.
void set_gemv_max_rows(int rows);

// y = one row of x against FP8 / FP4 w on the row kernels, with hc_post's outputs of y's row
// (hp, row 0) in the same launch: true where gemv() would take those kernels (one-row products of
// fewer than gemv_mma_min_out() outputs, outside batch-invariant mode; wo_b with the bound raised
// above 4,096), else nothing launched. The bits of gemv(), then hc_post().
bool gemv_row_hc_post(Exec& e, const float* x, const DevWeight& w, float* y, bool round_out,
                      const HcPostArgs& hp);
// The fewest outputs a one-row FP8 product takes the tensor-core GEMV at (fewer keep the row
// kernels and gemv_row_hc_post; DEEPINFER_CUDA_GEMV_MMA_MIN_OUT, default 4,096).
void set_gemv_mma_min_out(int64_t outputs);
int64_t gemv_mma_min_out();

bool gemv_experts_supported(int64_t n_slots, int64_t in);
void gemv_experts(Exec& e, const float* x, bool x_per_slot, int64_t n_slots, int K,
                  const DevWeight* experts, const int32_t* idx, float* y, int64_t ldy, int64_t out,
                  int64_t in, bool official, DevFormat format);

// Set false to force the reference kernels (tests compare both).
void set_fast_kernels(bool on);
bool fast_kernels();
// Tensor-core (WMMA bf16) GEMM for products whose inputs and weights are bf16-exact (official
// numerics, FP8/FP4 weights), more than 8 rows: with set_tensor_cores(true) from 9 rows, and by
// default past gemv_max_rows() for what cuBLASLt does not take (FP4 weights, inputs the caller
// rounded to bf16 such as wo_a's).
void gemm_tc(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w, float* y,
             int64_t ldy, bool round_out);
void set_tensor_cores(bool on);
bool tensor_cores();
// 1: a warp per output column; 2 (default): four columns per warp, 16-byte weight loads.
void set_gemv_version(int v);
int gemv_version();

}  // namespace deepinfer::cuda

namespace deepinfer::cuda {

// Row reductions with a block of threads per row (device only; ops.cu falls back to its serial
// bodies when emulated): RMSNorm, the sum of squares of mHC rows, argmax.
void rms_norm_fast(Exec& e, const float* x, int64_t rows, int64_t dim, const float* w, float eps,
                   float* y, bool round_in, bool round_out);
// The same, and yq = y's FP8 fake-quantized copy in 128-value blocks (fp8_quant_rows_from_fast's
// bits) in the same launch where a row is ≤ 4,096 wide and a multiple of 128.
void rms_norm_quant_fast(Exec& e, const float* x, int64_t rows, int64_t dim, const float* w,
                         float eps, float* y, bool round_in, bool round_out, float* yq);
// Few fp32 outputs over rows of ≥ 8,192 (the mHC mixes), ≤ 8 rows: K split over a cluster of
// blocks (gemv_cluster.cu; `DEEPINFER_CUDA_GEMV_CLUSTER=0` off).
bool gemv_cluster_preferred(const DevWeight& w, int64_t n, const float* x, int64_t ldx);
void gemv_cluster(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w, float* y,
                  int64_t ldy, bool round_out);
// ss[r] = Σ x[r, :]² over `width` values.
void sum_squares_fast(Exec& e, const float* x, int64_t rows, int64_t width, float* ss);
// The threads a row of sum_squares_fast's float4 kernel (each ≤ kVecMax float4s, thread i's
// float4s i + k · threads), 0 where it takes the scalar kernel.
int sum_squares_threads(const float* x, int64_t width);
void argmax_fast(Exec& e, const float* x, int64_t rows, int64_t V, int32_t* out);
// FP8 activation quantization in place (ops.cu fp8_quant_rows), a warp per block of `block`
// values: the same per-element rounding, the block's amax by warp shuffles (max is exact).
void fp8_quant_rows_fast(Exec& e, float* x, int64_t rows, int64_t dim, int block);
// The same from src rows (stride ld) into dst rows (stride dim): the copy and the quantization in
// one launch.
void fp8_quant_rows_from_fast(Exec& e, const float* src, int64_t ld, int64_t rows, int64_t dim,
                              int block, float* dst);

}  // namespace deepinfer::cuda
