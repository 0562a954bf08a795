// Tensor-core attention for prefill and decode batches (attention_tc.cu): the logits and P·V of the
// 64 heads of a row as bf16 mma tiles over the row's shared keys, the softmax (Exact, or the
// official tiled one) a warp per (row, head) between them. Not bitwise the reference body: sums
// run in tile order and fp32 operands are split into two bf16 terms (CudaKernels.AttentionTc
// bounds the difference); attention() takes it for every launch it supports.
#pragma once

#include <cstdint>

#include "backend/cuda/attention.cuh"

namespace deepinfer::cuda {

// On unless DEEPINFER_CUDA_ATTN_TC=0; tests switch it to compare with the other kernels.
bool attention_tc();
void set_attention_tc(bool on);
// The fewest rows a launch needs to take it (1 unless DEEPINFER_CUDA_ATTN_TC_MIN_ROWS says).
int attention_tc_min_rows();
void set_attention_tc_min_rows(int rows);
// The decode variants (attention_tc.cu; the same bits): on unless DEEPINFER_CUDA_ATTN_TC_DECODE=0,
// taken by launches of at most attention_tc_decode_rows() rows (DEEPINFER_CUDA_ATTN_TC_DECODE_ROWS,
// default 16) with at most 1024 slots.
bool attention_tc_decode();
void set_attention_tc_decode(bool on);
int attention_tc_decode_rows();
void set_attention_tc_decode_rows(int rows);
// The decode variants' softmax with every logit in registers (the same bits; on unless
// DEEPINFER_CUDA_ATTN_DECODE_SOFTMAX=0: H100, 4-layer slice at batch 1, with 16 heads a block and
// the rank top-k 1.29 / 1.30 ms a step vs 1.30 / 1.31).
bool attention_tc_decode_softmax();
void set_attention_tc_decode_softmax(bool on);
// Heads a decode logits / P·V block takes: 16 (four times the blocks; H100 at one row CSA
// 0.036 → 0.028 ms, HCA 0.023 → 0.019), or 64 with DEEPINFER_CUDA_ATTN_DECODE_HEADS=64; the same
// bits.
int attention_tc_decode_heads();
void set_attention_tc_decode_heads(int heads);
// H a multiple of 64, D of 128, at most 8192 slots, 16-byte aligned q and keys, ≥ min rows.
bool attention_tc_supported(const AttnArgs& a, int64_t rows);
// o as attention(); probs: its scratch [n, H, W + cslots] (holds the probabilities afterwards).
// True where the decode P·V applied a.out_pairs' inverse RoPE (attention()'s answer).
bool attention_tc_run(Exec& e, const Rows& rows, const AttnArgs& a, float* probs, float* o);

}  // namespace deepinfer::cuda
