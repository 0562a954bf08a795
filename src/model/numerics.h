// The two numerics of the V4 forward and the hooks where they differ. Exact (plain bf16/fp32
// checkpoints, what HF transformers computes): fp32 math, every hook is the identity. Official
// (a checkpoint with quantization_config): DeepSeek's reference roundings, installed as hooks.
#pragma once

#include <cstdint>

namespace deepinfer::model {

enum class Numerics { Exact, Official };

// Every hook edits values in place; a null hook is the identity (Exact mode leaves all null).
struct NumericsHooks {
  // bf16 rounding of an activation tensor between ops (sublayer inputs/outputs, residual state).
  void (*activation)(float* x, int64_t n) = nullptr;
  // KV-QAT of attention kv rows (window rows and compressed entries): FP8 e4m3 with UE8M0 scales
  // per 64 on dims [0, head_dim - rope_dim); the RoPE dims stay as they are.
  void (*kv_rows)(float* kv, int64_t rows, int head_dim, int rope_dim) = nullptr;
  // Indexer QAT of q heads and compressed index keys: Hadamard over index_head_dim, then FP4
  // e2m1 with UE8M0 scales per 32.
  void (*indexer_rows)(float* x, int64_t rows, int index_head_dim) = nullptr;
  // Rounding of the per-head index scores / weights (official: bf16 tensors).
  void (*index_scores)(float* s, int64_t n) = nullptr;
  // Replaces the fp32 per-head unweighted q RMS norm (official: bf16 tensor ops).
  void (*q_head_norm)(float* q, int n_heads, int head_dim, float eps) = nullptr;
  // Rounding of attention probabilities before P·V (official: bf16).
  void (*attn_probs)(float* p, int64_t n) = nullptr;
  // Replaces softmax + P·V of one query head (official: the reference kernel's online softmax over
  // its index list in tiles of 64 slots, bf16 probabilities, the sink in the denominator only, bf16
  // output). keys[0, n_window) are the window rows, oldest first, filling window_slots slots of the
  // list (the rest are padding); the compressed rows follow in their list order.
  void (*attend)(const float* q, const float* const* keys, int64_t n_keys, int64_t n_window,
                 int64_t window_slots, float sink, float scale, int head_dim, float* out) = nullptr;
  // Replaces the index score of one query against one index key (official: bf16 per-head dot
  // products, ReLU, bf16 products with the head weights, one bf16 sum). w holds the head weights
  // with both scales folded in (index_head_dim^-1/2 · heads^-1/2), rounded by index_scores.
  float (*index_score)(const float* q, const float* k, const float* w, int heads,
                       int dim) = nullptr;
};

// The hooks for a numerics mode: Exact → all identity; Official → what set_official_hooks()
// installed (identity until the quantized path registers its hooks).
const NumericsHooks& numerics_hooks(Numerics mode);
void set_official_hooks(const NumericsHooks& hooks);

inline void round_activation(const NumericsHooks& h, float* x, int64_t n) {
  if (h.activation) h.activation(x, n);
}

}  // namespace deepinfer::model
