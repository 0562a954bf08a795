// The one-row GEMV (decode at batch 1; gemv.cu sends n = 1 here when it takes the weight): bf16
// weights (the LM head) and the FP8 / FP4 weights of split-row shapes (< 2048 outputs over ≥ 2048
// inputs: wo_a's groups, the attention sublayer's products of xn), streamed as 16-byte chunks,
// four output columns per warp. Each lane copies its chunks asynchronously into its own slots of
// a ring of 3 (or 4) stages in shared memory, keeping two (three) in flight while it multiplies
// the oldest, so the bytes in flight do not cost registers; 1–8 warps share a column group (warp
// s taking every S-th chunk step of the row, the partial sums added in slice order through shared
// memory) so short matrices still fill the GPU; scale indices by shifts (power-of-two blocks).
// Not in the batch-invariant mode (a row's sum differs from the GEMV passes');
// DEEPINFER_CUDA_GEMV_ROW1=0 keeps the older kernels.
#pragma once

#include <cstdint>

#include "backend/cuda/exec.cuh"
#include "backend/cuda/formats.cuh"
#include "backend/cuda/gemv_group.cuh"

namespace deepinfer::cuda {

// The warps per column group the one-row kernel runs w at x with, or 0 where it does not take it
// (switched off, batch-invariant mode, a forced GEMV version, f32 weights, FP8 / FP4 outside the
// split-row shapes, alignment, scale blocks, or too few column groups to fill the GPU: those keep
// the older kernels).
int gemv_row1_split(const DevWeight& w, const float* x);
// y[0, w.out) = w · x (one row); split from gemv_row1_split (> 0).
void gemv_row1(Exec& e, const float* x, const DevWeight& w, int split, float* y, bool round_out);
// A split-row group at one row (gemv_group.cuh) in one launch: each job the one-row kernel takes
// runs on it, the others on the split-row body, so every job gets the bits gemv() gives it.
void gemv_row1_group(Exec& e, const float* x, const GemvJob* jobs, int count);

// On unless DEEPINFER_CUDA_GEMV_ROW1=0; the kernel checks time both.
bool gemv_row1_on();
void set_gemv_row1(bool on);
// Tuning the kernel checks sweep: the warps a launch aims for before it stops splitting rows
// (DEEPINFER_CUDA_GEMV_ROW1_WARPS, default 132 × 32) and the ring's stages
// (DEEPINFER_CUDA_GEMV_ROW1_STAGES, 3 by default, or 4).
void set_gemv_row1_tuning(int warps, int stages);
int gemv_row1_warps();
int gemv_row1_stages();

}  // namespace deepinfer::cuda
