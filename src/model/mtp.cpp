// The MTP (next-n) block of V4 (spec §6.10): e = enorm(embed[t_{p+1}]), h_j = hnorm(X_j) per
// stream, X_j = e_proj·e + h_proj·h_j, one SWA block (main RoPE table, score routing), then its
// own hc_head, norm and the shared LM head.
#include <algorithm>

#include "model/forward.h"
#include "model/model.h"

namespace deepinfer::model {

SequenceState Model::new_mtp_state() const {
  const ModelConfig& c = config_;
  SequenceState s;
  s.blocks.resize(1);
  BlockState& b = s.blocks[0];
  b.window = c.sliding_window;
  b.head_dim = c.head_dim;
  b.ring.assign(static_cast<size_t>(c.sliding_window) * c.head_dim, 0.0f);
  return s;
}

Status Model::forward_mtp(SequenceState& state, std::span<const float> streams,
                          std::span<const int32_t> next_ids, std::span<const int64_t> logit_rows,
                          float* logits) {
  if (weights_.mtp.empty()) return Error{"the checkpoint has no MTP block (mtp.0.*)"};
  const ModelConfig& c = config_;
  const int hc = c.hc_mult;
  const int64_t d = c.hidden_size, V = c.vocab_size, total = static_cast<int64_t>(next_ids.size());
  if (state.blocks.size() != 1) return Error{"sequence state is not an MTP state (new_mtp_state)"};
  if (static_cast<int64_t>(streams.size()) != total * hc * d) {
    return Error{"MTP streams hold " + std::to_string(streams.size()) + " values for " +
                 std::to_string(total) + " tokens of hc_mult·hidden"};
  }
  for (int32_t id : next_ids) {
    if (id < 0 || id >= c.vocab_size)
      return Error{"token id " + std::to_string(id) + " outside the vocabulary"};
  }
  for (int64_t r : logit_rows) {
    if (r < 0 || r >= total) return Error{"logit row " + std::to_string(r) + " outside the chunk"};
  }
  // The block is layer id num_layers: a sliding-window layer (ratio 0) with score routing.
  ModelConfig mc = c;
  mc.compress_ratios.assign(1, 0);
  mc.hash_routed.assign(1, false);
  const MtpWeights& mw = weights_.mtp[0];
  const BlockWeights& bw = mw.block;
  const NumericsHooks& hooks = numerics_hooks(c.numerics);
  Workspace& ws = *ws_;
  const float eps = static_cast<float>(c.rms_eps);
  constexpr int64_t kChunk = 512;
  for (int64_t start = 0; start < total; start += kChunk) {
    const int64_t n = std::min(kChunk, total - start);
    ChunkContext ctx{
        mc, hooks,         pool_.get(), ws, main_rope_, compress_rope_, next_ids.data() + start,
        n,  state.position};
    float* X = ws.get(kWsX, static_cast<size_t>(n * hc * d));
    float* u = ws.get(kWsU, static_cast<size_t>(n * d));
    float* xn = ws.get(kWsXn, static_cast<size_t>(n * d));
    float* y = ws.get(kWsY, static_cast<size_t>(n * d));
    float* post = ws.get(kWsPost, static_cast<size_t>(n * hc));
    float* comb = ws.get(kWsComb, static_cast<size_t>(n * hc * hc));
    float* e = ws.get(kWsMix + 4, static_cast<size_t>(n * d));
    float* ep = ws.get(kWsMix + 5, static_cast<size_t>(n * d));
    float* hs = ws.get(kWsMix + 6, static_cast<size_t>(n * hc * d));
    float* hp = ws.get(kWsMix + 7, static_cast<size_t>(n * hc * d));
    for (int64_t t = 0; t < n; ++t) cpu::dequantize_row(weights_.embed, ctx.ids[t], e + t * d);
    rms_norm_rows(e, n, d, mw.enorm.data(), eps, e);
    round_activation(hooks, e, n * d);
    rms_norm_rows(streams.data() + start * hc * d, n * hc, d, mw.hnorm.data(), eps, hs);
    round_activation(hooks, hs, n * hc * d);
    cpu::linear(e, n, mw.e_proj, ep, ctx.pool);
    cpu::linear(hs, n * hc, mw.h_proj, hp, ctx.pool);
    for (int64_t t = 0; t < n; ++t) {
      for (int j = 0; j < hc; ++j) {
        const float* a = ep + t * d;
        const float* b = hp + (t * hc + j) * d;
        float* x = X + (t * hc + j) * d;
        for (int64_t k = 0; k < d; ++k) x[k] = a[k] + b[k];
      }
    }
    round_activation(hooks, X, n * hc * d);
    hc_pre(ctx, bw.hc_attn, X, post, comb, u);
    rms_norm_rows(u, n, d, bw.attn_norm.data(), eps, xn);
    round_activation(hooks, xn, n * d);
    attention_sublayer(ctx, 0, bw, state.blocks[0], xn, y);
    round_activation(hooks, y, n * d);
    hc_post(ctx, post, comb, y, X);
    hc_pre(ctx, bw.hc_ffn, X, post, comb, u);
    rms_norm_rows(u, n, d, bw.ffn_norm.data(), eps, xn);
    round_activation(hooks, xn, n * d);
    moe_sublayer(ctx, bw, false, xn, y);
    hc_post(ctx, post, comb, y, X);
    state.position += n;

    int64_t rows = 0;
    for (int64_t r : logit_rows) rows += (r >= start && r < start + n);
    if (rows == 0) continue;
    float* Xr = ws.get(kWsMix + 1, static_cast<size_t>(rows * hc * d));
    float* h = ws.get(kWsMix + 2, static_cast<size_t>(rows * d));
    float* lg = ws.get(kWsMix + 3, static_cast<size_t>(rows * V));
    int64_t k = 0;
    for (int64_t r : logit_rows) {
      if (r >= start && r < start + n)
        std::copy_n(X + (r - start) * hc * d, hc * d, Xr + (k++) * hc * d);
    }
    hc_head(ctx, mw.hc_head, Xr, rows, h);
    rms_norm_rows(h, rows, d, mw.norm.data(), eps, h);
    round_activation(hooks, h, rows * d);
    cpu::linear(h, rows, weights_.head, lg, pool_.get());
    k = 0;
    for (size_t i = 0; i < logit_rows.size(); ++i) {
      const int64_t r = logit_rows[i];
      if (r >= start && r < start + n)
        std::copy_n(lg + (k++) * V, V, logits + static_cast<int64_t>(i) * V);
    }
  }
  return Status::Ok();
}

}  // namespace deepinfer::model
