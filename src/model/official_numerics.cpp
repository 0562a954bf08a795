#include "model/official_numerics.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>

#include "backend/cpu/quant_act.h"
#include "backend/cpu/quant_linear.h"
#include "backend/cpu/simd.h"

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

// ((q · kᵀ).relu() * w).sum(heads) of the reference with bf16 tensors: each head's dot product
// (fp32 accumulation) rounded to bf16, ReLU, the product with the bf16 head weight rounded, the
// sum over heads accumulated in fp32 and rounded once.
float index_score(const float* q, const float* k, const float* w, int heads, int dim) {
  float sum = 0.0f;
  for (int h = 0; h < heads; ++h) {
    const float d = cpu::round_bf16(cpu::dot(q + static_cast<int64_t>(h) * dim, k, dim));
    if (d > 0) sum += cpu::round_bf16(d * w[h]);
  }
  return cpu::round_bf16(sum);
}

// sparse_attn of the reference, one query head: the index list is walked in tiles of 64 slots with
// a running max (the sink excluded), exp(logit − running max) is summed in fp32 for the
// denominator and rounded to bf16 for P·V (fp32 accumulation), earlier tiles are rescaled when
// the max grows, the sink joins the denominator at the end, and the output is rounded to bf16.
void attend(const float* q, const float* const* keys, int64_t n_keys, int64_t n_window,
            int64_t window_slots, float sink, float scale, int head_dim, float* out) {
  constexpr int64_t kTile = 64;
  float qb[4096], acc[4096], logit[kTile];
  const float* tile_keys[kTile];
  for (int i = 0; i < head_dim; ++i) {
    qb[i] = cpu::round_bf16(q[i]);
    acc[i] = 0.0f;
  }
  const int64_t n_slots = window_slots + (n_keys - n_window);
  float run_max = -INFINITY, denom = 0.0f;
  for (int64_t t0 = 0; t0 < n_slots; t0 += kTile) {
    int m = 0;  // the valid keys of this tile
    for (int64_t slot = t0; slot < std::min(n_slots, t0 + kTile); ++slot) {
      const int64_t k =
          slot < window_slots ? (slot < n_window ? slot : -1) : n_window + (slot - window_slots);
      if (k >= 0) tile_keys[m++] = keys[k];
    }
    if (m == 0) continue;
    float tile_max = -INFINITY;
    for (int i = 0; i < m; ++i) {
      logit[i] = cpu::dot(qb, tile_keys[i], head_dim) * scale;
      tile_max = std::max(tile_max, logit[i]);
    }
    const float new_max = std::max(run_max, tile_max);
    const float rescale = std::exp(run_max - new_max);
    float psum = 0.0f;
    for (int d = 0; d < head_dim; ++d) acc[d] *= rescale;
    for (int i = 0; i < m; ++i) {
      const float p = std::exp(logit[i] - new_max);
      psum += p;
      cpu::axpy(cpu::round_bf16(p), tile_keys[i], acc, head_dim);
    }
    denom = denom * rescale + psum;
    run_max = new_max;
  }
  denom += std::exp(sink - run_max);
  for (int d = 0; d < head_dim; ++d) out[d] = cpu::round_bf16(acc[d] / denom);
}

}  // namespace official

NumericsHooks official_numerics_hooks() {
  NumericsHooks h;
  h.activation = official::activation;
  h.kv_rows = official::kv_rows;
  h.indexer_rows = official::indexer_rows;
  h.index_scores = official::index_scores;
  h.q_head_norm = official::q_head_norm;
  h.attn_probs = official::attn_probs;
  h.attend = official::attend;
  h.index_score = official::index_score;
  return h;
}

Status check_official_config(const ModelConfig& c) {
  bool csa = false;
  for (int i = 0; i < c.num_layers; ++i) csa = csa || c.kind(i) == AttentionKind::Csa;
  const int d = c.index_head_dim;
  if (csa && (d <= 0 || (d & (d - 1)) != 0)) {
    return Error{
        "config.json: the official numerics rotate index keys with a Hadamard transform, "
        "which needs a power-of-two index_head_dim (got " +
        std::to_string(d) + ")"};
  }
  return Status::Ok();
}

void install_official_numerics() {
  static std::once_flag once;
  std::call_once(once, [] {
    set_official_hooks(official_numerics_hooks());
    cpu::register_quant_kernels(cpu::QuantActivations::Official);
  });
}

}  // namespace deepinfer::model
