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
  const int64_t d = c.hidden_size, total = static_cast<int64_t>(next_ids.size());
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
    ws.segs.assign(1, Segment{&state, 0, n, state.position});
    ws.step_rows.assign(1, n);
    int32_t* row_seg = ws.get_i32(kWsRows, static_cast<size_t>(n));
    int32_t* row_pos = ws.get_i32(kWsRows + 1, static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      row_seg[t] = 0;
      row_pos[t] = static_cast<int32_t>(state.position + t);
    }
    ChunkContext ctx{
        mc, hooks,   pool_.get(),  ws,      main_rope_, compress_rope_,  next_ids.data() + start,
        n,  ws.segs, ws.step_rows, row_seg, row_pos,    batch_invariant_};
    float* X = ws.get(kWsX, static_cast<size_t>(n * hc * d));
    float* e = ws.get(kWsMix + 4, static_cast<size_t>(n * d));
    float* ep = ws.get(kWsMix + 5, static_cast<size_t>(n * d));
    float* hs = ws.get(kWsMix + 6, static_cast<size_t>(n * hc * d));
    float* hp = ws.get(kWsMix + 7, static_cast<size_t>(n * hc * d));
    for (int64_t t = 0; t < n; ++t) cpu::dequantize_row(weights_.embed, ctx.ids[t], e + t * d);
    rms_norm_rows(e, n, d, mw.enorm.data(), eps, e);
    round_activation(hooks, e, n * d);
    rms_norm_rows(streams.data() + start * hc * d, n * hc, d, mw.hnorm.data(), eps, hs);
    round_activation(hooks, hs, n * hc * d);
    linear_all(ctx, e, mw.e_proj, ep);
    cpu::linear(hs, n * hc, mw.h_proj, hp, ctx.pool);  // one sequence: the same call as before
    for (int64_t t = 0; t < n; ++t) {
      for (int j = 0; j < hc; ++j) {
        const float* a = ep + t * d;
        const float* b = hp + (t * hc + j) * d;
        float* x = X + (t * hc + j) * d;
        for (int64_t k = 0; k < d; ++k) x[k] = a[k] + b[k];
      }
    }
    round_activation(hooks, X, n * hc * d);
    block_forward(ctx, 0, bw, false, X);
    state.position += n;
    ws.logit_rows.clear();
    for (size_t k = 0; k < logit_rows.size(); ++k) {
      const int64_t r = logit_rows[k];
      if (r >= start && r < start + n)
        ws.logit_rows.push_back({r - start, logits + static_cast<int64_t>(k) * c.vocab_size});
    }
    std::stable_sort(ws.logit_rows.begin(), ws.logit_rows.end(),
                     [](const LogitRow& a, const LogitRow& b) { return a.row < b.row; });
    chunk_logits(ctx, mw.hc_head, mw.norm, weights_.head, X, ws.logit_rows);
  }
  return Status::Ok();
}

}  // namespace deepinfer::model
