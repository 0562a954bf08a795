// The per-step pieces shared by the main stack and the MTP block: one block over the streams,
// the logits of the requested rows, and the batch-invariant linear over stacked segments.
#include <algorithm>

#include "model/forward.h"

namespace deepinfer::model {

void linear_rows(const ChunkContext& ctx, const float* x, std::span<const int64_t> seg_rows,
                 const cpu::WeightView& w, float* y) {
  int64_t total = 0;
  for (int64_t r : seg_rows) total += r;
  if (!ctx.batch_invariant || seg_rows.size() <= 1) {
    cpu::linear(x, total, w, y, ctx.pool);
    return;
  }
  for_each_run(seg_rows, [&](int64_t row0, int64_t rows) {
    cpu::linear(x + row0 * w.in, rows, w, y + row0 * w.out, ctx.pool);
  });
}

void block_forward(const ChunkContext& ctx, int layer, const BlockWeights& w, bool hash, float* X) {
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
  attention_sublayer(ctx, layer, w, xn, y);
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
                  std::span<const LogitRow> want) {
  const ModelConfig& c = ctx.config;
  const int hc = c.hc_mult;
  const int64_t d = c.hidden_size, V = c.vocab_size;
  const auto rows = static_cast<int64_t>(want.size());
  if (rows == 0) return;
  float* Xr = ctx.ws.get(kWsMix + 1, static_cast<size_t>(rows * hc * d));
  float* h = ctx.ws.get(kWsMix + 2, static_cast<size_t>(rows * d));
  float* lg = ctx.ws.get(kWsMix + 3, static_cast<size_t>(rows * V));
  std::vector<int64_t>& seg_rows = ctx.ws.seg_rows;
  seg_rows.assign(ctx.segs.size(), 0);
  for (int64_t k = 0; k < rows; ++k) {
    const int64_t r = want[static_cast<size_t>(k)].row;
    std::copy_n(X + r * hc * d, hc * d, Xr + k * hc * d);
    ++seg_rows[static_cast<size_t>(ctx.row_seg[r])];
  }
  hc_head(ctx, hc_head_w, Xr, rows, seg_rows, h);
  rms_norm_rows(h, rows, d, norm.data(), static_cast<float>(c.rms_eps), h);
  round_activation(ctx.hooks, h, rows * d);
  linear_rows(ctx, h, seg_rows, head, lg);
  for (int64_t k = 0; k < rows; ++k) std::copy_n(lg + k * V, V, want[static_cast<size_t>(k)].out);
}

}  // namespace deepinfer::model
