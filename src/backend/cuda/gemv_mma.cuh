// FP8 GEMV passes (1–8 rows) on the tensor cores (gemv_mma.cu): the weight's e4m3 codes go to
// fp16 by one conversion per pair and into mma.sync m16n8k16 with fp32 accumulators, the batch
// rows as the mma's 8 columns. The CUDA-core GEMVs spend several instructions per weight byte
// (decode to fp32, a multiply-add each, the block scale's index) and read FP8 at 1.5–1.8 TB/s at
// one row; here a byte costs half a conversion (H200, wq_b at one row: 2.44 TB/s).
#pragma once

#include <algorithm>
#include <cstdint>

#include "backend/cuda/exec.cuh"
#include "backend/cuda/formats.cuh"

namespace deepinfer::cuda {

// One product of a launch: y[r][o] = Σ_k x[r][k] · w[o][k] for the launch's rows r (bf16-rounded
// where round_out).
struct MmaGemvJob {
  const DevWeight* w = nullptr;
  const float* x = nullptr;
  int64_t ldx = 0;
  float* y = nullptr;
  int64_t ldy = 0;
  bool round_out = false;
  // Or null: also y's FP8 copy per 128 values at yq + r · ldy + o, the bits of
  // fp8_quant_rows_from over y's row (w.out a multiple of 128, y's blocks on the row's).
  float* yq = nullptr;
};

// On unless DEEPINFER_CUDA_GEMV_MMA=0 (gemv_mma_supported answers false then).
// Blocks per output tile along K (a cluster; 0: chosen per launch, else 1, 2, 4 or 8);
// DEEPINFER_CUDA_GEMV_MMA_SPLIT sets it from the environment.
void set_gemv_mma_split(int split);
int gemv_mma_split();
// How the one-token FP4 experts decode their codes: 0 through conversions, 1 a lane's second row
// on the integer pipe (the pipes share the work), 2 both rows there (DEEPINFER_CUDA_FP4_INT_DECODE,
// default 2). The same bits every way.
void set_fp4_int_decode(int rows);
int fp4_int_decode();
// FP8 lanes take their step's bytes as FP4 does, [16t, 16t + 16) and [64 + 16t, 80 + 16t) instead
// of [32t, 32t + 32), so that each load instruction of a quad reads whole 32-byte sectors
// (DEEPINFER_CUDA_FP8_FULL_SECTORS, default off). Sums in another k order: not the same bits.
void set_fp8_full_sectors(bool on);
bool fp8_full_sectors();

// The products' weights streamed by bulk asynchronous copies into a ring in shared memory
// (gemv_bulk.cuh) instead of loads into registers, where a launch's shape allows; the same bits
// (DEEPINFER_CUDA_GEMV_BULK, default off).
void set_gemv_mma_bulk(bool on);
bool gemv_mma_bulk();

// Whether w at n rows of x (row stride ldx) runs here: FP8 with 128 × 128 block scales, rows in
// whole 128-row scale blocks from a 128-aligned first row, K a multiple of 1,024, 16-byte aligned
// rows and inputs, 1 ≤ n ≤ 8. The inputs must be exact in fp16 after a power-of-two scale per
// 128 values (FP8-quantized or bf16 values are, bar magnitudes 2^-29 below their block's largest).
// Launches of fewer than 128 tiles of 128 rows split K over a cluster of up to 8 blocks.
bool gemv_mma_supported(const DevWeight& w, int64_t n, const float* x, int64_t ldx);
// jobs[0, count) (count ≤ kMaxGemvJobs, each gemv_mma_supported at n): one launch, K split until
// it has min_blocks blocks (0: the default, 128, or DEEPINFER_CUDA_GEMV_MMA_MIN_BLOCKS).
void gemv_mma(Exec& e, const MmaGemvJob* jobs, int count, int64_t n, int min_blocks = 0);
// min_blocks of the shared expert's w1 + w3 launch beside the routed experts
// (DEEPINFER_CUDA_SHARED_MIN_BLOCKS, default 64: 32 tiles split 2 instead of 4, leaving block
// slots to the routed launch beside it; with the SwiGLU fold, H100 batch 1 782.8 / 782.6 / 777.6
// tok/s against 779.6 / 777.5 / 774.0 with neither).
int shared_expert_min_blocks();

// The routed experts of one token (slots = its top-k), as one launch per product set: slot s of
// product p reads experts[p][idx[s]] and writes y[p] + s · ldy, bf16-rounded; its input row is
// x + s · ldx (x_per_slot) or x + (s / per_token) · ldx, FP8-quantized values. FP4 (×32 UE8M0)
// runs as f16 mmas with the block scales in the decoded weights (exact for scales in
// [2^-23, 2^9]; steps with others in fp32), FP8 as gemv_mma. Each slot
// streams its expert's weights itself, so it suits tokens whose slots name distinct experts
// (DEEPINFER_CUDA_EXPERTS_MMA=0: off, experts_mma_supported answers false).
struct ExpertMmaProducts {
  const DevWeight* experts[2] = {};  // device arrays [E]
  float* y[2] = {};
  int count = 0;  // 1 or 2 products (w1 and w3 share their input)
  DevFormat format = DevFormat::FP4;
  int64_t out = 0, in = 0;
  // w2 with its SwiGLU folded in (experts_swiglu_fold()): x is w1's output and swiglu_h3 w3's,
  // and each block stages swiglu_quant's FP8 inputs itself (the same operations, the same bits),
  // scaled by the slot's routing weight where swiglu_row_w is given.
  const float* swiglu_h3 = nullptr;
  const float* swiglu_row_w = nullptr;
  float swiglu_limit = 0.0f;
  bool swiglu_official = false;
  // Every expert's FP4 scale rows 16-byte aligned (experts_bulk_supported), so the bulk ring
  // (set_gemv_mma_bulk) can copy them.
  bool scales16 = false;
};
// The one-token routed w2 with its SwiGLU folded in (DEEPINFER_CUDA_EXPERTS_SWIGLU_FOLD=0 keeps
// swiglu_quant's launch before it); the same bits. w2's weight loads issued before the launch
// before ends (the ids are settled by then) measured no faster and were removed.
bool experts_swiglu_fold();
void set_experts_swiglu_fold(bool on);
// Whether an expert shaped like w (every expert of the product alike) runs here on x.
bool experts_mma_supported(const DevWeight& w, const float* x, int64_t ldx);
// Whether such an expert's scales suit the bulk ring (FP8's always do).
bool experts_bulk_supported(const DevWeight& w);
void experts_mma(Exec& e, const ExpertMmaProducts& p, const int32_t* idx, int slots, int per_token,
                 const float* x, int64_t ldx, bool x_per_slot, int64_t ldy);

}  // namespace deepinfer::cuda
