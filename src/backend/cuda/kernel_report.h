// Device self-check and timing of the matrix kernels on random weights in every shipped format
// (bf16, FP8 128×128 UE8M0, FP4 ×32): the fast kernels against the reference bodies, and the
// achieved HBM bandwidth (decode GEMV) or FLOP rate (tiled GEMM). One line per measurement.
#pragma once

#include <string>
#include <vector>

namespace deepinfer::cuda {

struct KernelCheck {
  std::string line;      // human-readable result
  double rel_error = 0;  // ‖fast − reference‖∞ / ‖reference‖∞
  double tolerance = 0;  // what rel_error must stay under (bf16 outputs: 1e-2)
};

// Needs a device; returns an empty list without one.
std::vector<KernelCheck> kernel_report();
// The same for the fast attention, indexer and per-row kernels (fast_ops.cuh): bitwise equality
// with the reference bodies (tolerance 0) and the time of each.
std::vector<KernelCheck> op_kernel_report();
// The fused per-row kernels of a decode step (kernel_report_fused.cu): the float4 RMSNorm / sums
// of squares within fp32 rounding of the reference bodies, the fused routing, mHC pre + norm and
// KV row kernels bitwise equal to what they replace.
std::vector<KernelCheck> fused_kernel_report();
// The cuBLASLt products (FP8 128×128 blocks, bf16) on the V4-Flash slice's projection shapes at
// 512 and 8192 rows: against the reference bodies and their TFLOP/s; and, batch-invariant, a
// row's bits alone and inside batches of 3, 70 and 512 rows (tolerance 0).
std::vector<KernelCheck> lt_kernel_report();

// The grouped routed-expert kernels (moe_grouped.cuh) against the reference body at V4-Flash
// expert sizes in FP4 / FP8 / bf16, decode and prefill slot counts with skewed routing (no NaN
// left, batch-invariant bits, ≤ 1e-4 relative), with their times beside the per-slot kernel.
std::vector<KernelCheck> expert_kernel_report();
// The cuBLAS path of the grouped experts (grouped_experts_lt) at 512 / 2048 / 8192 tokens with
// skewed routing and 8192 uniform, fp32 (hi + lo) and bf16-exact inputs: ≤ 1e-4 relative to the
// reference body, every slot written, with its TFLOP/s per mode beside the WMMA kernel's.
std::vector<KernelCheck> expert_lt_kernel_report();
// The decode-sized tensor-core experts (grouped_experts_dec) at 1 / 16 / 64 / 256 tokens, skewed
// and uniform routing, bf16-exact inputs: ≤ 1e-4 relative, no NaN left, batch-invariant bits, and
// its bandwidth over the distinct experts' bytes beside the CUDA-core kernel's.
std::vector<KernelCheck> expert_dec_kernel_report();
// The FP4 decode kernel's launch shapes (ExpertDecShape) at 1 / 4 / 16 / 21 tokens: each shape's
// outputs the same bits as shape {2, 2, 0, 8} (tolerance 0), with the times.
std::vector<KernelCheck> expert_dec_shape_report();

// The tensor-core prefill attention (attention_tc.cuh) against the reference body at V4-Flash
// sizes: 512-row chunks from 0 and from 7,680 and a two-segment launch, CSA and HCA, Exact
// (≤ 1e-4 relative to the largest output) and official (≤ 1e-2: bf16 outputs).
std::vector<KernelCheck> attention_tc_kernel_report();
// The tensor-core indexer scores (indexer_tc.cuh) against the reference body at V4-Flash indexer
// sizes, official numerics: decodes of 1 and 16 rows and a 512-row chunk; the scores (≤ 1e-2 of
// the largest) and the share of the top-k ids the reference also selects (≥ 98 %).
std::vector<KernelCheck> indexer_tc_kernel_report();

// Prefill products against the reference body of linear(): wo_a's FP8 product at 512 and 8,192
// rows on the WMMA tiles and on cuBLASLt after a bf16 dequantization (per launch, kept copy; all
// ≤ 1e-2: bf16 outputs), and the short-output fp32 kernels of the mHC mixes at both (≤ 1e-5 at
// 512 rows, ≤ 3e-5 at 8,192: another summation order).
std::vector<KernelCheck> prefill_kernel_report();

// The dense products at decode batch sizes (16, 64, 256 rows) on the V4-Flash slice's shapes
// (FP8 q / output projections, a piece of the bf16 LM head, the fp32 mHC mix, a narrow FP8
// weight) through linear(), as GEMV passes of 8 rows and as the default path past them (cuBLASLt,
// the narrow cluster kernel): against the reference body, with GB/s and the share of 4.8 TB/s.
std::vector<KernelCheck> decode_dense_kernel_report();
// The one-row GEMV (gemv_row1.cuh) on the slice's batch-1 shapes (an FP8 split-row weight, a
// 32,768-row piece of the bf16 LM head, wo_a's group of eight, the xn group): each stage count and
// split target against the reference body (≤ 1e-4), its GB/s with the weights cold in L2 and warm,
// beside the older kernels' and a device copy of the same bytes.
std::vector<KernelCheck> gemv_row1_kernel_report();
// The tensor-core FP8 GEMV (gemv_mma.cuh) on the slice's decode shapes (wq_b, wo_b, the shared
// expert's w1 + w3 as one launch and w2, wo_a's group of eight) at 1, 3 and 8 rows: against the
// reference body (≤ 1e-4) at every K split, with its GB/s cold in L2 beside the CUDA-core kernels'.
std::vector<KernelCheck> gemv_mma_kernel_report();

// compressor_push_fast against the reference push: multi-segment launches that start inside
// windows and continue, both compressor kinds (ratio 4 overlapping, ratio 128); entry stores and
// states bit-identical (tolerance 0). emulate: on the host (no device needed); else on the device,
// with the times of an 8,192-row chunk of each V4-Flash compressor shape.
std::vector<KernelCheck> compressor_kernel_report(bool emulate);

// Which matrix kernels the forward uses: decode GEMV version (0: per format, the default; 1: a
// warp per column; 2: four columns per warp, 16-byte loads) and the tensor-core tiles for official
// FP8/FP4 products.
void select_kernels(int gemv_version, bool tensor_cores);

}  // namespace deepinfer::cuda
