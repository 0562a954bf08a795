// DeepSeek's official V4-Flash numerics (inference code of revision 60d8d707) as the model's
// NumericsHooks: bf16 activations, FP8 KV QAT of the no-RoPE dims per 64, Hadamard + FP4 QAT of
// the indexer q/k, bf16 index scores, the bf16-op q head norm and the reference attention kernel
// (tiles of 64); plus the FP8/FP4 kernels that quantize GEMM inputs to FP8 per 1×128 and round
// outputs to bf16.
#pragma once

#include <cstdint>

#include "common/result.h"
#include "model/config.h"
#include "model/numerics.h"

namespace deepinfer::model {

// The official hook table (every entry set).
NumericsHooks official_numerics_hooks();

// set_official_hooks(official_numerics_hooks()) and the FP8/FP4 linear kernels with official
// activation quantization. Idempotent; the loader calls it before checking a quantized checkpoint.
void install_official_numerics();

// What the official numerics need of a config (the Hadamard rotation: a power-of-two
// index_head_dim in CSA layers); a clear error otherwise.
Status check_official_config(const ModelConfig& config);

// The individual hooks, exposed for tests.
namespace official {
void activation(float* x, int64_t n);
void kv_rows(float* kv, int64_t rows, int head_dim, int rope_dim);
void indexer_rows(float* x, int64_t rows, int index_head_dim);
void index_scores(float* s, int64_t n);
void q_head_norm(float* q, int n_heads, int head_dim, float eps);
void attn_probs(float* p, int64_t n);
float index_score(const float* q, const float* k, const float* w, int heads, int dim);
void attend(const float* q, const float* const* keys, int64_t n_keys, int64_t n_window,
            int64_t window_slots, float sink, float scale, int head_dim, float* out);
}  // namespace official

}  // namespace deepinfer::model
