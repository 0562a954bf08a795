#include "model/official_numerics.h"

#include <cmath>
#include <mutex>

#include "backend/cpu/quant_act.h"
#include "backend/cpu/quant_linear.h"

namespace deepinfer::model {
namespace official {

void activation(float* x, int64_t n) { cpu::round_bf16(x, n); }

// act_quant(kv[..., :-rope], 64, inplace) on bf16 rows (RMSNorm and RoPE outputs are bf16).
void kv_rows(float* kv, int64_t rows, int head_dim, int rope_dim) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = kv + r * head_dim;
    cpu::round_bf16(row, head_dim);
    cpu::fp8_act_quant_inplace(row, head_dim - rope_dim, 64);
  }
}

// rotate_activation (Hadamard, dim^-1/2) then fp4_act_quant(.., 32, inplace), on bf16 rows.
void indexer_rows(float* x, int64_t rows, int index_head_dim) {
  cpu::round_bf16(x, rows * index_head_dim);
  cpu::hadamard_rotate_rows(x, rows, index_head_dim);
  cpu::fp4_act_quant_inplace(x, rows * index_head_dim, 32);
}

void index_scores(float* s, int64_t n) { cpu::round_bf16(s, n); }

// q *= rsqrt(q.square().mean(-1) + eps) with bf16 tensors: q², the mean (fp32 sum, one rounding),
// mean + eps, the rsqrt and the product each rounded to bf16.
void q_head_norm(float* q, int n_heads, int head_dim, float eps) {
  for (int h = 0; h < n_heads; ++h) {
    float* v = q + static_cast<int64_t>(h) * head_dim;
    float sum = 0.0f;
    for (int i = 0; i < head_dim; ++i) {
      v[i] = cpu::round_bf16(v[i]);
      sum += cpu::round_bf16(v[i] * v[i]);
    }
    const float mean = cpu::round_bf16(sum / static_cast<float>(head_dim));
    const float t = cpu::round_bf16(mean + eps);
    const float r = cpu::round_bf16(1.0f / std::sqrt(t));
    for (int i = 0; i < head_dim; ++i) v[i] = cpu::round_bf16(v[i] * r);
  }
}

void attn_probs(float* p, int64_t n) { cpu::round_bf16(p, n); }

}  // namespace official

NumericsHooks official_numerics_hooks() {
  NumericsHooks h;
  h.activation = official::activation;
  h.kv_rows = official::kv_rows;
  h.indexer_rows = official::indexer_rows;
  h.index_scores = official::index_scores;
  h.q_head_norm = official::q_head_norm;
  h.attn_probs = official::attn_probs;
  return h;
}

void install_official_numerics() {
  static std::once_flag once;
  std::call_once(once, [] {
    set_official_hooks(official_numerics_hooks());
    cpu::register_quant_kernels(cpu::QuantActivations::Official);
  });
}

}  // namespace deepinfer::model
