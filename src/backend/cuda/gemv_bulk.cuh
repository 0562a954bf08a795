// The tensor-core GEMV with its weights streamed by bulk asynchronous copies into a ring in shared
// memory (gemv_bulk.cu) instead of a ring of loads in registers: each warp's 16 rows arrive as 16
// contiguous copies a stage, completed on an mbarrier, so the bytes in flight cost no registers
// and no load instruction per 16 bytes. The same mma_step on the same values in the same order
// as gemv_mma.cu's kernel, so the same bits. Off by default (DEEPINFER_CUDA_GEMV_BULK=1 on).
#pragma once

#include <cstddef>

#include "backend/cuda/gemv_mma_tile.cuh"

namespace deepinfer::cuda::mma {

// Whether a launch of format f whose blocks take `slice` values of a row can run there: FP8 in
// the default lane layout (not set_fp8_full_sectors) with slices of whole 256-value stages, FP4
// with slices of whole 512-value stages and 16-byte aligned scale rows (scales16), and staged
// inputs of at most kMaxInputBytes (the shared memory its kernels are set up for).
bool bulk_fits(DevFormat f, int64_t slice, bool full_sectors, bool scales16, size_t input_bytes);
// The launch gemv_mma.cu would make (tiles × split blocks, input_bytes of staged inputs) on the
// bulk ring.
void launch_bulk(Exec& e, const MmaLaunch& L, DevFormat f, bool experts, int int_decode, int tiles,
                 int split, size_t input_bytes);

}  // namespace deepinfer::cuda::mma
