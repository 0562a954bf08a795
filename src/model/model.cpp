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
  m->batch_invariant_ = options.batch_invariant;
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
  const BatchSequence one{&state, ids, logit_rows, logits};
  return run_batch(std::span(&one, 1), streams);
}

Status Model::forward_batch(std::span<const BatchSequence> batch) {
  return run_batch(batch, nullptr);
}

Status Model::run_batch(std::span<const BatchSequence> batch, float* streams) {
  const ModelConfig& c = config_;
  for (size_t i = 0; i < batch.size(); ++i) {
    const BatchSequence& b = batch[i];
    if (!b.state || b.state->blocks.size() != static_cast<size_t>(c.num_layers))
      return Error{"sequence state does not belong to this model"};
    for (size_t k = 0; k < i; ++k)
      if (batch[k].state == b.state) return Error{"a batch names the same sequence state twice"};
    for (int32_t id : b.ids) {
      if (id < 0 || id >= c.vocab_size) {
        return Error{"token id " + std::to_string(id) + " outside the vocabulary [0, " +
                     std::to_string(c.vocab_size) + ")"};
      }
    }
    const auto total = static_cast<int64_t>(b.ids.size());
    for (int64_t r : b.logit_rows) {
      if (r < 0 || r >= total) {
        return Error{"logit row " + std::to_string(r) + " outside the " + std::to_string(total) +
                     " input tokens"};
      }
    }
  }
  if (streams && batch.size() != 1) return Error{"streams are written for a batch of one only"};
  const NumericsHooks& hooks = numerics_hooks(c.numerics);
  Workspace& ws = *ws_;
  const int hc = c.hc_mult;
  const int64_t d = c.hidden_size, V = c.vocab_size;
  // Rounds: each takes the next piece of at most kMaxChunk tokens of every unfinished sequence.
  for (int64_t start = 0;; start += kMaxChunk) {
    if (!collect_round(batch, start, kMaxChunk, V, ws.segs, ws.step_rows, ws.step_ids,
                       ws.logit_rows))
      break;
    const auto n = static_cast<int64_t>(ws.step_ids.size());
    int32_t* row_seg = ws.get_i32(kWsRows, static_cast<size_t>(n));
    int32_t* row_pos = ws.get_i32(kWsRows + 1, static_cast<size_t>(n));
    for (size_t si = 0; si < ws.segs.size(); ++si) {
      const Segment& sg = ws.segs[si];
      for (int64_t t = 0; t < sg.n; ++t) {
        row_seg[sg.row0 + t] = static_cast<int32_t>(si);
        row_pos[sg.row0 + t] = static_cast<int32_t>(sg.pos0 + t);
      }
    }
    // The logits rows ascend within each segment and the segments follow each other.
    std::stable_sort(ws.logit_rows.begin(), ws.logit_rows.end(),
                     [](const LogitRow& a, const LogitRow& b) { return a.row < b.row; });
    ChunkContext ctx{
        c, hooks,   pool_.get(),  ws,      main_rope_, compress_rope_,  ws.step_ids.data(),
        n, ws.segs, ws.step_rows, row_seg, row_pos,    batch_invariant_};
    float* X = ws.get(kWsX, static_cast<size_t>(n * hc * d));
    for (int64_t t = 0; t < n; ++t) {
      float* xt = X + t * hc * d;
      cpu::dequantize_row(weights_.embed, ctx.ids[t], xt);
      for (int j = 1; j < hc; ++j) std::copy_n(xt, d, xt + j * d);
    }
    round_activation(hooks, X, n * hc * d);
    for (int i = 0; i < c.num_layers; ++i) {
      const size_t li = static_cast<size_t>(i);
      block_forward(ctx, i, weights_.blocks[li], c.hash_routed[li], X);
    }
    for (const Segment& sg : ws.segs) sg.state->position += sg.n;
    if (streams) std::copy_n(X, n * hc * d, streams + start * hc * d);  // batch of one
    chunk_logits(ctx, weights_.hc_head, weights_.norm, weights_.head, X, ws.logit_rows);
  }
  return Status::Ok();
}

}  // namespace deepinfer::model
