// The decode-sized variants of the tensor-core attention's three kernels (attention_tc_decode.cu),
// launched by attention_tc_run for launches of at most attention_tc_decode_rows() rows and
// kDecodeMaxSlots slots. Each output element gets the prefill kernels' fragments and mma sequence
// (the same bits).
#pragma once

#include "backend/cuda/attention.cuh"

namespace deepinfer::cuda {

constexpr int kDecodeMaxSlots = 1024;  // every key address of a row in shared memory

// logits[r, h, s] = q · key · scale into probs [n, H, S], −inf for a slot without a key.
void decode_logits_tc(Exec& e, const Rows& rows, const AttnArgs& a, int S, float* probs);
// The softmax in place over probs with every logit of a warp in registers; false (nothing
// launched) unless attention_tc_decode_softmax().
bool decode_softmax_tc(Exec& e, const Rows& rows, const AttnArgs& a, int S, float* probs);
// o[r, h, d] = Σ_s p[r, h, s] · key(r, s)[d], rounded to bf16 in the official numerics; there,
// with a.out_pairs > 0, also rope_round_bf16's inverse rotation of the last 2 · out_pairs values
// of each head (the same expressions, so the same bits), and true.
bool decode_pv_tc(Exec& e, const Rows& rows, const AttnArgs& a, int S, const float* probs,
                  float* o);

}  // namespace deepinfer::cuda
