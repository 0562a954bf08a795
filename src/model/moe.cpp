// MoE sublayer of a V4 block (spec §6.8): sqrtsoftplus router (hash-routed by token id, or top-k
// of score + bias), normalised weights × routed scale, clamped SwiGLU experts, shared expert.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cpu/simd.h"
#include "model/forward.h"

namespace deepinfer::model {
namespace {

enum : size_t {
  kLogits = kWsMoe,
  kRows,
  kOutE,
  kOutS,
  kAcc,
  kRowW,
  kShared = kWsMoe + 6,
  kRouted = kWsMoe + 8,
  kIdx = kWsMoe,
  kTok,
  kOrder,
};

float score_of(const std::string& fn, float z) {
  if (fn == "sigmoid") return 1.0f / (1.0f + std::exp(-z));
  const float sp = z > 20.0f ? z : std::log1p(std::exp(z));
  return std::sqrt(sp);
}

// y[m, d] = w2 · (silu(min(w1·x, L)) ⊙ clamp(w3·x, −L, L)) for m rows of x. With row_w, row r's
// SwiGLU product is scaled by row_w[r] before w2 (the official order: its bf16 rounding and FP8
// quantization see the weighted product).
// seg_rows: how many of the m rows belong to each segment (the batch-invariant linear's groups).
void expert(const ChunkContext& ctx, const ExpertWeights& e, const float* x, int64_t m,
            std::span<const int64_t> seg_rows, float* y, size_t slot,
            const float* row_w = nullptr) {
  const int64_t inter = e.w1.out;
  float* h1 = ctx.ws.get(slot, static_cast<size_t>(m * inter));
  float* h3 = ctx.ws.get(slot + 1, static_cast<size_t>(m * inter));
  linear_rows(ctx, x, seg_rows, e.w1, h1);
  linear_rows(ctx, x, seg_rows, e.w3, h3);
  const float L = static_cast<float>(ctx.config.swiglu_limit);
  const bool clamp = L > 0;
  for (int64_t i = 0; i < m * inter; ++i) {
    float g = h1[i], u = h3[i];
    if (clamp) {
      g = std::min(g, L);
      u = std::clamp(u, -L, L);
    }
    h1[i] = g / (1.0f + std::exp(-g)) * u;
    if (row_w) h1[i] *= row_w[i / inter];
  }
  round_activation(ctx.hooks, h1, m * inter);
  linear_rows(ctx, h1, seg_rows, e.w2, y);
}

}  // namespace

void moe_sublayer(const ChunkContext& ctx, const BlockWeights& w, bool hash, const float* x,
                  float* y) {
  const ModelConfig& c = ctx.config;
  const int64_t n = ctx.n, d = c.hidden_size;
  const int E = c.n_routed_experts, K = c.experts_per_token;
  float* logits = ctx.ws.get(kLogits, static_cast<size_t>(n * E));
  linear_all(ctx, x, w.gate, logits);
  int32_t* idx = ctx.ws.get_i32(kIdx, static_cast<size_t>(n * K));
  float* wts = ctx.ws.get(kRows, static_cast<size_t>(n * K));
  int32_t* order_buf = ctx.ws.get_i32(kOrder, static_cast<size_t>(E));
  for (int64_t t = 0; t < n; ++t) {
    float* z = logits + t * E;
    if (c.scoring_func == "softmax") {
      const float m = *std::max_element(z, z + E);
      float s = 0;
      for (int e = 0; e < E; ++e) s += (z[e] = std::exp(z[e] - m));
      for (int e = 0; e < E; ++e) z[e] /= s;
    } else {
      for (int e = 0; e < E; ++e) z[e] = score_of(c.scoring_func, z[e]);
    }
    int32_t* it = idx + t * K;
    if (hash) {
      const int32_t tok = ctx.ids[t];
      std::copy_n(w.tid2eid.data() + int64_t{tok} * K, K, it);
    } else {
      int32_t* order = order_buf;
      std::iota(order, order + E, 0);
      std::partial_sort(order, order + K, order + E, [&](int32_t a, int32_t b) {
        const float sa = z[a] + w.gate_bias[static_cast<size_t>(a)];
        const float sb = z[b] + w.gate_bias[static_cast<size_t>(b)];
        return sa > sb || (sa == sb && a < b);
      });
      std::copy_n(order, K, it);
    }
    float sum = 0;
    for (int k = 0; k < K; ++k) sum += z[it[k]];
    const float scale = static_cast<float>(c.routed_scaling) / (sum + 1e-20f);
    for (int k = 0; k < K; ++k) wts[t * K + k] = z[it[k]] * scale;
  }

  // Shared expert over all rows, then each routed expert over the rows routed to it.
  expert(ctx, w.shared, x, n, ctx.seg_rows, y, kShared);
  float* rows = ctx.ws.get(kOutE, static_cast<size_t>(n * d));
  float* out = ctx.ws.get(kOutS, static_cast<size_t>(n * d));
  int32_t* tok = ctx.ws.get_i32(kTok, static_cast<size_t>(n));
  float* acc = ctx.ws.get(kAcc, static_cast<size_t>(n * d));
  const bool official = c.numerics == Numerics::Official;
  float* row_w = ctx.ws.get(kRowW, static_cast<size_t>(n * K));
  std::fill(acc, acc + n * d, 0.0f);
  std::vector<int64_t>& seg_rows = ctx.ws.seg_rows;
  for (int e = 0; e < E; ++e) {
    int64_t m = 0;
    seg_rows.assign(ctx.segs.size(), 0);
    for (int64_t t = 0; t < n; ++t) {
      for (int k = 0; k < K; ++k) {
        if (idx[t * K + k] == e) {
          tok[m] = static_cast<int32_t>(t * K + k);
          std::copy_n(x + t * d, d, rows + m * d);
          ++seg_rows[static_cast<size_t>(ctx.row_seg[t])];
          ++m;
        }
      }
    }
    if (m == 0) continue;
    if (official) {
      for (int64_t r = 0; r < m; ++r) row_w[r] = wts[tok[r]];
    }
    expert(ctx, w.experts[static_cast<size_t>(e)], rows, m, seg_rows, out, kRouted,
           official ? row_w : nullptr);
    for (int64_t r = 0; r < m; ++r) {
      const int64_t t = tok[r] / K;
      cpu::axpy(official ? 1.0f : wts[tok[r]], out + r * d, acc + t * d, d);
    }
  }
  for (int64_t i = 0; i < n * d; ++i) y[i] += acc[i];
  round_activation(ctx.hooks, y, n * d);
}

}  // namespace deepinfer::model
