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

namespace {
void init_store(EntryStore& s, EntryFormat format, int dim, int rope_dim, int ratio) {
  s.format = format;
  s.dim = dim;
  s.rope_dim = rope_dim;
  s.ratio = ratio;
  s.row_bytes = entry_row_bytes(format, dim, rope_dim);
}
}  // namespace

EntryFormat Model::entry_format(bool index_keys, bool pack) const {
  if (!pack || config_.numerics != Numerics::Official) return EntryFormat::F32;
  return index_keys ? EntryFormat::Mxfp4 : EntryFormat::Fp8Kv;
}

SequenceState Model::new_state(bool pack_entries) const {
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
      init_store(b.compressed, entry_format(false, pack_entries), c.head_dim, c.rope_dim, r);
      if (csa) {
        b.index_head_dim = c.index_head_dim;
        init_compressor(b.index_compressor, r, c.index_head_dim, true);
        init_store(b.index_keys, entry_format(true, pack_entries), c.index_head_dim,
                   std::min(c.rope_dim, c.index_head_dim), r);
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
  const int64_t d = c.hidden_size;
  for (int64_t start = 0; start < total; start += kMaxChunk) {
    const int64_t n = std::min(kMaxChunk, total - start);
    ChunkContext ctx{
        c, hooks,         pool_.get(), ws, main_rope_, compress_rope_, ids.data() + start,
        n, state.position};
    float* X = ws.get(kWsX, static_cast<size_t>(n * hc * d));
    for (int64_t t = 0; t < n; ++t) {
      float* xt = X + t * hc * d;
      cpu::dequantize_row(weights_.embed, ctx.ids[t], xt);
      for (int j = 1; j < hc; ++j) std::copy_n(xt, d, xt + j * d);
    }
    round_activation(hooks, X, n * hc * d);
    for (int i = 0; i < c.num_layers; ++i) {
      const size_t li = static_cast<size_t>(i);
      block_forward(ctx, i, weights_.blocks[li], c.hash_routed[li], state.blocks[li], X);
    }
    state.position += n;
    if (streams) std::copy_n(X, n * hc * d, streams + start * hc * d);
    chunk_logits(ctx, weights_.hc_head, weights_.norm, weights_.head, X, start, logit_rows, logits);
  }
  return Status::Ok();
}

}  // namespace deepinfer::model
