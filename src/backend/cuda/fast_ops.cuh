// Fast device-only versions of the attention-side and per-row reference bodies (attention.cu,
// ops.cu): a block or warp per row instead of one thread, the same arithmetic in the same order,
// so each returns bitwise what its reference body returns (CudaKernels checks it). The callers
// pick them when not emulating and fast_kernels() is on, and fall back where *_supported says no.
#pragma once

#include <cstdint>

#include "backend/cuda/attention.cuh"
#include "backend/cuda/ops.cuh"

namespace deepinfer::cuda {

// Whether the callers take these kernels (with fast_kernels()); DEEPINFER_CUDA_FAST_OPS=0 keeps
// the reference bodies, to measure a step before and after with one binary.
// The second set of fused row kernels — mHC pre + RMSNorm (hc_pre_norm_fused), the q head norm
// with RoPE, the KV row, the shared expert's SwiGLU with its FP8 copy (swiglu_quant): on unless
// DEEPINFER_CUDA_FUSED_ROWS=0 (set_fused_rows; their kernel checks turn it on); each is checked
// bitwise against the launches it replaces.
bool fused_rows();
void set_fused_rows(bool on);
bool fast_ops();

// attention(): a block per (row, head): the row's logits, its softmax (Exact, or the official
// tiled one) and P·V from shared memory. Needs the slot list to fit shared memory, D ≤ 1024.
bool attention_fast_supported(const AttnArgs& a);
void attention_fast(Exec& e, const Rows& rows, const AttnArgs& a, float* o);
// attention() split along the slots (attention_split.cu): chunks of `chunk` slots (a multiple of
// the official 64-slot tile), a block per (row, head, chunk), then a merge; chunks = 0: not taken
// (the one-block kernel fits and, exact, the batch fills the GPU or, official, always; the
// batch-invariant mode; too little scratch). Exact: within fp32 rounding of the reference;
// official: the reference's bf16 weights, their P·V summed by chunks. DEEPINFER_CUDA_SPLIT_KV=0
// never splits, =1 splits wherever it can; set_split_kv_mode(-1 auto, 0, 1) does the same from
// code.
struct SplitKvPlan {
  int chunks = 0, chunk = 0, S = 0;
};
SplitKvPlan split_kv_plan(const Rows& rows, const AttnArgs& a);
void attention_split(Exec& e, const Rows& rows, const AttnArgs& a, const SplitKvPlan& p,
                     float* scratch, float* o);
void set_split_kv_mode(int mode);
int split_kv_mode();

// indexer_topk(): scores by blocks of 32 entries (the per-head dot products in parallel, each
// score's sum over heads in the reference order; official numerics at 64 heads on the tensor
// cores instead, indexer_tc.cuh), then the top-k by topk_select (or, for top-k above its limit,
// the rank of every entry in parallel).
bool indexer_fast_supported(const IndexerArgs& a);
void indexer_topk_fast(Exec& e, const Rows& rows, const IndexerArgs& a, float* scores, int32_t* sel,
                       int32_t* cnt);
// The top-k of each row's visible scores (the first (pos + 1) / ratio of `stride`), by the rank
// rule of both indexers (higher score, then lower id): a block per row, radix select, O(visible)
// (indexer_select.cu). sel[r · topk + i], i < min(visible, topk): in rank order, or by_id in id
// order; pad writes -1 after them; cnt (may be null) gets min(visible, topk).
struct TopkArgs {
  const float* scores = nullptr;
  int64_t stride = 0;
  int ratio = 1, topk = 0;
  bool by_id = false, pad = false;
};
bool topk_select_supported(int topk, int64_t stride);
void topk_select(Exec& e, const Rows& rows, const TopkArgs& a, int32_t* sel, int32_t* cnt);
// The top-k of decode-sized launches (≤ 16 rows, ≤ 4,096 visible entries, V4's rank order) by
// counting each entry's rank on many blocks: the same entries in the same order
// (on unless DEEPINFER_CUDA_TOPK_RANK=0; H100, scores + top-k of one row 0.025 → 0.020 ms against
// the radix select).
bool topk_rank();
void set_topk_rank(bool on);

// q_head_norm_official(): a warp per head row (the sum of squares still in row order).
void q_head_norm_official_fast(Exec& e, float* q, int64_t rows, int64_t head_dim, float eps);
// The same with the rows' RoPE in the launch (q_head_norm_rope_official); false (nothing launched)
// where the rotated part does not start on a warp boundary or fused_rows() is off.
// rms_norm(kv, w, official rounding) → rope() → kv_rows_official in one launch
// (kv_norm_rope_official), the same bits; false where the row does not fit one float4 a thread
// (or fused_rows() off).
bool kv_norm_rope_official_fast(Exec& e, float* kv, int64_t rows, int head_dim, int rope_dim,
                                const float* w, float eps, const RopeRows& rope_rows);
bool q_head_norm_rope_fast(Exec& e, float* q, int64_t rows, int64_t head_dim, float eps,
                           const RopeRows& rope_rows);
// kv_rows_official(): a block per row, a warp per FP8 block of 64.
void kv_rows_official_fast(Exec& e, float* kv, int64_t rows, int head_dim, int rope_dim);
// indexer_rows_official(): a warp per row (dim 32, 64, 128 or 256), the Hadamard butterflies across
// lanes by shuffles.
bool indexer_rows_fast_supported(int dim);
void indexer_rows_official_fast(Exec& e, float* x, int64_t rows, int dim);
// hc_pre()'s per-row mixes and Sinkhorn, a warp per row holding the hc × hc matrix (hc = 4); the
// caller has the row sums of squares in row_ss.
bool hc_pre_fast_supported(int hc);
void hc_pre_rows_fast(Exec& e, const HcParams& p, const float* mix, const float* row_ss, int64_t n,
                      float* pre, float* post, float* comb);

// hc_pre followed by rms_norm (or rms_norm_quant where xnq is given) of its u into xn, as one
// launch after the sums of squares (mhc_pre_fused.cu), the same bits; false (nothing launched)
// where it does not apply: not hc = 4 rows of a multiple of 128 in 256 … 4,096, the fast kernels
// off, unaligned rows, no row_ss scratch, fused_rows() off.
bool hc_pre_norm_fused(Exec& e, const HcParams& p, const float* X, const float* mix, int64_t n,
                       float* pre, float* post, float* comb, float* u, float* row_ss,
                       const float* norm_w, float eps, float* xn, bool round_in, bool round_out,
                       float* xnq);

}  // namespace deepinfer::cuda
