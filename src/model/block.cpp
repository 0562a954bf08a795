// The per-chunk steps shared by the main stack and the MTP block: one block over the streams,
// and the logits of the requested rows.
#include <algorithm>

#include "model/forward.h"

namespace deepinfer::model {

void block_forward(const ChunkContext& ctx, int layer, const BlockWeights& w, bool hash,
                   BlockState& st, float* X) {
  const ModelConfig& c = ctx.config;
  const int hc = c.hc_mult;
  const int64_t n = ctx.n, d = c.hidden_size;
  const float eps = static_cast<float>(c.rms_eps);
  float* u = ctx.ws.get(kWsU, static_cast<size_t>(n * d));
  float* xn = ctx.ws.get(kWsXn, static_cast<size_t>(n * d));
  float* y = ctx.ws.get(kWsY, static_cast<size_t>(n * d));
  float* post = ctx.ws.get(kWsPost, static_cast<size_t>(n * hc));
  float* comb = ctx.ws.get(kWsComb, static_cast<size_t>(n * hc * hc));
  hc_pre(ctx, w.hc_attn, X, post, comb, u);
  rms_norm_rows(u, n, d, w.attn_norm.data(), eps, xn);
  round_activation(ctx.hooks, xn, n * d);
  attention_sublayer(ctx, layer, w, st, xn, y);
  round_activation(ctx.hooks, y, n * d);
  hc_post(ctx, post, comb, y, X);
  hc_pre(ctx, w.hc_ffn, X, post, comb, u);
  rms_norm_rows(u, n, d, w.ffn_norm.data(), eps, xn);
  round_activation(ctx.hooks, xn, n * d);
  moe_sublayer(ctx, w, hash, xn, y);
  hc_post(ctx, post, comb, y, X);
}

void chunk_logits(const ChunkContext& ctx, const HyperConnectionWeights& hc_head_w,
                  const std::vector<float>& norm, const cpu::WeightView& head, const float* X,
                  int64_t start, std::span<const int64_t> logit_rows, float* logits) {
  const ModelConfig& c = ctx.config;
  const int hc = c.hc_mult;
  const int64_t n = ctx.n, d = c.hidden_size, V = c.vocab_size;
  int64_t rows = 0;
  for (int64_t r : logit_rows) rows += (r >= start && r < start + n);
  if (rows == 0) return;
  float* Xr = ctx.ws.get(kWsMix + 1, static_cast<size_t>(rows * hc * d));
  float* h = ctx.ws.get(kWsMix + 2, static_cast<size_t>(rows * d));
  float* lg = ctx.ws.get(kWsMix + 3, static_cast<size_t>(rows * V));
  int64_t k = 0;
  for (int64_t r : logit_rows) {
    if (r >= start && r < start + n)
      std::copy_n(X + (r - start) * hc * d, hc * d, Xr + (k++) * hc * d);
  }
  hc_head(ctx, hc_head_w, Xr, rows, h);
  rms_norm_rows(h, rows, d, norm.data(), static_cast<float>(c.rms_eps), h);
  round_activation(ctx.hooks, h, rows * d);
  cpu::linear(h, rows, head, lg, ctx.pool);
  k = 0;
  for (size_t i = 0; i < logit_rows.size(); ++i) {
    const int64_t r = logit_rows[i];
    if (r >= start && r < start + n)
      std::copy_n(lg + (k++) * V, V, logits + static_cast<int64_t>(i) * V);
  }
}

}  // namespace deepinfer::model
