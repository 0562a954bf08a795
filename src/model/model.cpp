#include "model/model.h"

#include <algorithm>

#include "model/compressor.h"
#include "model/forward.h"
#include "model/official_numerics.h"

namespace deepinfer::model {

namespace {
constexpr int64_t kMaxChunk = 512;  // longer inputs run as chunked prefill through the state
}

Model::~Model() = default;

Result<std::unique_ptr<Model>> Model::load(const std::string& dir, const ModelOptions& options) {
  auto config = load_model_config(dir);
  if (!config) return config.error();
  auto ckpt = Checkpoint::open(dir);
  if (!ckpt) return ckpt.error();
  std::unique_ptr<Model> m(new Model);
  m->config_ = std::move(config.value());
  m->checkpoint_ = std::move(ckpt.value());
  // A quantized checkpoint runs DeepSeek's official numerics (and needs the FP8/FP4 kernels).
  if (m->config_.numerics == Numerics::Official) {
    if (Status s = check_official_config(m->config_); !s) return s.error();
    install_official_numerics();
  }
  auto weights = load_weights(m->config_, m->checkpoint_);
  if (!weights) return weights.error();
  m->weights_ = std::move(weights.value());
  m->main_rope_ = make_rope_table(m->config_.main_rope, m->config_.rope_dim);
  m->compress_rope_ = make_rope_table(m->config_.compress_rope, m->config_.rope_dim);
  m->pool_ = std::make_unique<cpu::ThreadPool>(std::max(1, options.threads));
  m->ws_ = std::make_unique<Workspace>();
  return m;
}

SequenceState Model::new_state() const {
  const ModelConfig& c = config_;
  SequenceState s;
  s.blocks.resize(static_cast<size_t>(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) {
    BlockState& b = s.blocks[static_cast<size_t>(i)];
    b.window = c.sliding_window;
    b.head_dim = c.head_dim;
    b.ring.assign(static_cast<size_t>(c.sliding_window) * c.head_dim, 0.0f);
    const int r = c.ratio(i);
    if (r > 0) {
      const bool csa = c.kind(i) == AttentionKind::Csa;
      init_compressor(b.compressor, r, c.head_dim, csa);
      if (csa) {
        b.index_head_dim = c.index_head_dim;
        init_compressor(b.index_compressor, r, c.index_head_dim, true);
      }
    }
  }
  return s;
}

Status Model::forward(SequenceState& state, std::span<const int32_t> ids,
                      std::span<const int64_t> logit_rows, float* logits, float* streams) {
  const ModelConfig& c = config_;
  const int64_t total = static_cast<int64_t>(ids.size());
  if (state.blocks.size() != static_cast<size_t>(c.num_layers)) {
    return Error{"sequence state does not belong to this model"};
  }
  for (int32_t id : ids) {
    if (id < 0 || id >= c.vocab_size) {
      return Error{"token id " + std::to_string(id) + " outside the vocabulary [0, " +
                   std::to_string(c.vocab_size) + ")"};
    }
  }
  for (int64_t r : logit_rows) {
    if (r < 0 || r >= total) {
      return Error{"logit row " + std::to_string(r) + " outside the " + std::to_string(total) +
                   " input tokens"};
    }
  }
  const NumericsHooks& hooks = numerics_hooks(c.numerics);
  Workspace& ws = *ws_;
  const int hc = c.hc_mult;
  const int64_t d = c.hidden_size, V = c.vocab_size;
  for (int64_t start = 0; start < total; start += kMaxChunk) {
    const int64_t n = std::min(kMaxChunk, total - start);
    ChunkContext ctx{
        c, hooks,         pool_.get(), ws, main_rope_, compress_rope_, ids.data() + start,
        n, state.position};
    float* X = ws.get(kWsX, static_cast<size_t>(n * hc * d));
    float* u = ws.get(kWsU, static_cast<size_t>(n * d));
    float* xn = ws.get(kWsXn, static_cast<size_t>(n * d));
    float* y = ws.get(kWsY, static_cast<size_t>(n * d));
    float* post = ws.get(kWsPost, static_cast<size_t>(n * hc));
    float* comb = ws.get(kWsComb, static_cast<size_t>(n * hc * hc));
    for (int64_t t = 0; t < n; ++t) {
      float* xt = X + t * hc * d;
      cpu::dequantize_row(weights_.embed, ctx.ids[t], xt);
      for (int j = 1; j < hc; ++j) std::copy_n(xt, d, xt + j * d);
    }
    round_activation(hooks, X, n * hc * d);
    const float eps = static_cast<float>(c.rms_eps);
    for (int i = 0; i < c.num_layers; ++i) {
      const BlockWeights& bw = weights_.blocks[static_cast<size_t>(i)];
      hc_pre(ctx, bw.hc_attn, X, post, comb, u);
      rms_norm_rows(u, n, d, bw.attn_norm.data(), eps, xn);
      round_activation(hooks, xn, n * d);
      attention_sublayer(ctx, i, bw, state.blocks[static_cast<size_t>(i)], xn, y);
      round_activation(hooks, y, n * d);
      hc_post(ctx, post, comb, y, X);
      hc_pre(ctx, bw.hc_ffn, X, post, comb, u);
      rms_norm_rows(u, n, d, bw.ffn_norm.data(), eps, xn);
      round_activation(hooks, xn, n * d);
      moe_sublayer(ctx, bw, c.hash_routed[static_cast<size_t>(i)], xn, y);
      hc_post(ctx, post, comb, y, X);
    }
    state.position += n;
    if (streams) std::copy_n(X, n * hc * d, streams + start * hc * d);

    // Logits at the requested rows of this chunk.
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
    hc_head(ctx, weights_.hc_head, Xr, rows, h);
    rms_norm_rows(h, rows, d, weights_.norm.data(), eps, h);
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
