// The V4.1 forward driver (spec §12.2 items 7-9): embedding, Engram at its layers, lagged mHC
// around attention and MoE (each sublayer collapses its input with the pre of the previous
// sublayer; the first with one-hot, the final collapse with the last FFN's pre, no hc_head),
// bias-only routing with gate temperature, the head; plus the shared numeric helpers.
#include "model/v41_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/quant_act.h"
#include "backend/cpu/simd.h"
#include "model/qat32_linear.h"
#include "model/v41_engram.h"
#include "model/v41_forward.h"

namespace deepinfer::model::v41 {

namespace {

// hc_mixes + hc_split_sinkhorn of the reference for each of n tokens.
void hc_mixes(V41Chunk& ch, const float* X, const cpu::WeightView& fn,
              const std::vector<float>& scale, const std::vector<float>& base, float* pre,
              float* post, float* comb) {
  const V41Config& c = ch.c;
  const int hc = c.hc_mult, mix = c.hc_mix();
  const int64_t n = ch.n, width = static_cast<int64_t>(hc) * c.hidden_size;
  float* m = ch.ws.get(3, static_cast<size_t>(n * mix));
  v41_plain_rows(ch, X, ch.seg_rows, fn, m);
  const float eps = static_cast<float>(c.hc_eps);
  for (int64_t t = 0; t < n; ++t) {
    const float* x = X + t * width;
    float ss = 0.0f;
    for (int64_t k = 0; k < width; ++k) ss += x[k] * x[k];
    const float rs =
        1.0f / std::sqrt(ss / static_cast<float>(width) + static_cast<float>(c.rms_eps));
    float* mt = m + t * mix;
    for (int i = 0; i < mix; ++i) mt[i] *= rs;
    for (int j = 0; j < hc; ++j) {
      pre[t * hc + j] =
          1.0f / (1.0f + std::exp(-(mt[j] * scale[0] + base[static_cast<size_t>(j)]))) + eps;
      post[t * hc + j] =
          2.0f / (1.0f + std::exp(-(mt[hc + j] * scale[1] + base[static_cast<size_t>(hc + j)])));
    }
    float* cm = comb + t * hc * hc;
    for (int i = 0; i < hc * hc; ++i)
      cm[i] = mt[2 * hc + i] * scale[2] + base[static_cast<size_t>(2 * hc + i)];
    for (int i = 0; i < hc; ++i) {
      float mx = cm[i * hc];
      for (int j = 1; j < hc; ++j) mx = std::max(mx, cm[i * hc + j]);
      float s = 0.0f;
      for (int j = 0; j < hc; ++j) s += (cm[i * hc + j] = std::exp(cm[i * hc + j] - mx));
      for (int j = 0; j < hc; ++j) cm[i * hc + j] = cm[i * hc + j] / s + eps;
    }
    auto col_norm = [&] {
      for (int j = 0; j < hc; ++j) {
        float s = 0.0f;
        for (int i = 0; i < hc; ++i) s += cm[i * hc + j];
        for (int i = 0; i < hc; ++i) cm[i * hc + j] /= (s + eps);
      }
    };
    col_norm();
    for (int it = 0; it < c.hc_sinkhorn_iters - 1; ++it) {
      for (int i = 0; i < hc; ++i) {
        float s = 0.0f;
        for (int j = 0; j < hc; ++j) s += cm[i * hc + j];
        for (int j = 0; j < hc; ++j) cm[i * hc + j] /= (s + eps);
      }
      col_norm();
    }
  }
}

// u = bf16(Σ_j pre_j · X_j)
void hc_collapse(const float* X, const float* pre, int64_t n, int hc, int64_t d, float* u) {
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t k = 0; k < d; ++k) {
      float s = 0.0f;
      for (int j = 0; j < hc; ++j) s += pre[t * hc + j] * X[(t * hc + j) * d + k];
      u[t * d + k] = cpu::round_bf16(s);
    }
  }
}

// X'_j = bf16(post_j · y + Σ_i comb_ij · X_i), in place.
void hc_expand(float* X, const float* y, const float* post, const float* comb, int64_t n, int hc,
               int64_t d, float* tmp) {
  for (int64_t t = 0; t < n; ++t) {
    float* xt = X + t * hc * d;
    std::memcpy(tmp, xt, sizeof(float) * static_cast<size_t>(hc * d));
    const float* cm = comb + t * hc * hc;
    for (int j = 0; j < hc; ++j) {
      for (int64_t k = 0; k < d; ++k) {
        float s = post[t * hc + j] * y[t * d + k];
        float r = 0.0f;
        for (int i = 0; i < hc; ++i) r += cm[i * hc + j] * tmp[i * d + k];
        xt[j * d + k] = cpu::round_bf16(s + r);
      }
    }
  }
}

}  // namespace

void v41_linear(V41Chunk& ch, const float* x, int64_t rows, const cpu::WeightView& w, float* y,
                bool bf16_out) {
  qat32_linear(x, rows, w, y, bf16_out ? LinearOut::Bf16 : LinearOut::Fp32, ch.ws.xq, ch.pool);
}

void v41_linear_rows(V41Chunk& ch, const float* x, std::span<const int64_t> seg_rows,
                     const cpu::WeightView& w, float* y, bool bf16_out) {
  for_each_run(seg_rows, [&](int64_t row0, int64_t rows) {
    v41_linear(ch, x + row0 * w.in, rows, w, y + row0 * w.out, bf16_out);
  });
}

void v41_plain_rows(V41Chunk& ch, const float* x, std::span<const int64_t> seg_rows,
                    const cpu::WeightView& w, float* y) {
  for_each_run(seg_rows, [&](int64_t row0, int64_t rows) {
    cpu::linear(x + row0 * w.in, rows, w, y + row0 * w.out, ch.pool);
  });
}

void v41_rms_norm(const float* x, int64_t rows, int64_t dim, const float* w, double eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float ss = 0.0f;
    for (int64_t k = 0; k < dim; ++k) ss += xr[k] * xr[k];
    const float rs = 1.0f / std::sqrt(ss / static_cast<float>(dim) + static_cast<float>(eps));
    float* yr = y + r * dim;
    for (int64_t k = 0; k < dim; ++k) yr[k] = cpu::round_bf16((w ? w[k] : 1.0f) * (xr[k] * rs));
  }
}

void v41_rope(const RopeTable& t, float* x, int64_t rows, int dim, int rope_dim, int64_t position,
              bool inverse) {
  float cs[256], sn[256];
  const int pairs = rope_dim / 2;
  rope_cos_sin(t, position, pairs, cs, sn);
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * dim + (dim - rope_dim);
    rope_rotate(v, pairs, cs, sn, inverse);
    cpu::round_bf16(v, rope_dim);
  }
}

void v41_moe(V41Chunk& ch, const V41BlockWeights& w, const float* x, float* y) {
  const V41Config& c = ch.c;
  const int64_t n = ch.n, d = c.hidden_size, inter = c.moe_intermediate;
  const int E = c.n_routed_experts, k = c.experts_per_token;
  float* scores = ch.ws.get(24, static_cast<size_t>(n * E));
  float* acc = ch.ws.get(25, static_cast<size_t>(n * d));
  float* wsel = ch.ws.get(26, static_cast<size_t>(n * k));
  std::vector<int32_t>& sel = ch.ws.order;
  sel.assign(static_cast<size_t>(n * k), 0);
  v41_plain_rows(ch, x, ch.seg_rows, w.gate, scores);
  const float temp = static_cast<float>(c.gate_temp);
  for (int64_t t = 0; t < n; ++t) {
    float* s = scores + t * E;
    for (int e = 0; e < E; ++e) s[e] /= temp;
    if (c.scoring_func == "softmax") {
      float mx = s[0], sum = 0.0f;
      for (int e = 1; e < E; ++e) mx = std::max(mx, s[e]);
      for (int e = 0; e < E; ++e) sum += (s[e] = std::exp(s[e] - mx));
      for (int e = 0; e < E; ++e) s[e] /= sum;
    } else if (c.scoring_func == "sigmoid") {
      for (int e = 0; e < E; ++e) s[e] = 1.0f / (1.0f + std::exp(-s[e]));
    } else {
      for (int e = 0; e < E; ++e)
        s[e] = std::sqrt(s[e] > 20.0f ? s[e] : std::log1p(std::exp(s[e])));
    }
    int32_t* st = sel.data() + t * k;
    for (int i = 0; i < k; ++i) {  // top-k of s + bias, lower index on ties
      int best = -1;
      float bv = 0.0f;
      for (int e = 0; e < E; ++e) {
        bool used = false;
        for (int u = 0; u < i; ++u) used = used || st[u] == e;
        if (used) continue;
        const float v = s[e] + w.gate_bias[static_cast<size_t>(e)];
        if (best < 0 || v > bv) best = e, bv = v;
      }
      st[i] = best;
    }
    float sum = 0.0f;
    for (int i = 0; i < k; ++i) sum += (wsel[t * k + i] = s[st[i]]);
    for (int i = 0; i < k; ++i) {
      if (c.norm_topk_prob && k > 1) wsel[t * k + i] /= (sum + 1e-20f);
      wsel[t * k + i] *= static_cast<float>(c.routed_scaling);
    }
  }
  std::fill(acc, acc + n * d, 0.0f);
  float* xe = ch.ws.get(27, static_cast<size_t>(n * d));
  float* h1 = ch.ws.get(28, static_cast<size_t>(n * inter));
  float* h3 = ch.ws.get(29, static_cast<size_t>(n * inter));
  float* ye = ch.ws.get(30, static_cast<size_t>(n * d));
  std::vector<int32_t>& rows = ch.ws.block_picks;
  std::vector<float>& rw = ch.ws.route_weights;
  std::vector<int64_t>& run_rows = ch.ws.run_rows;
  const float lim = static_cast<float>(c.swiglu_limit);
  // The expert's m gathered rows, seg_rows of them per segment (runs as in for_each_run).
  auto run = [&](const V41Expert& ex, int64_t m, std::span<const int64_t> seg_rows,
                 const float* weights) {
    v41_linear_rows(ch, xe, seg_rows, ex.w1, h1, true);
    v41_linear_rows(ch, xe, seg_rows, ex.w3, h3, true);
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t i = 0; i < inter; ++i) {
        float g = h1[r * inter + i], u = h3[r * inter + i];
        if (lim > 0) {
          u = std::clamp(u, -lim, lim);
          g = std::min(g, lim);
        }
        float v = g / (1.0f + std::exp(-g)) * u;
        if (weights) v *= weights[r];
        h1[r * inter + i] = cpu::round_bf16(v);
      }
    }
    v41_linear_rows(ch, h1, seg_rows, ex.w2, ye, true);
  };
  for (int e = 0; e < E; ++e) {
    rows.clear();
    rw.clear();
    run_rows.clear();
    for (const V41Segment& sg : ch.segs) {
      int64_t m = 0;
      for (int64_t t = sg.row0; t < sg.row0 + sg.n; ++t)
        for (int i = 0; i < k; ++i)
          if (sel[static_cast<size_t>(t * k + i)] == e) {
            rows.push_back(static_cast<int32_t>(t));
            rw.push_back(wsel[t * k + i]);
            ++m;
          }
      run_rows.push_back(m);
    }
    if (rows.empty()) continue;
    const int64_t m = static_cast<int64_t>(rows.size());
    for (int64_t r = 0; r < m; ++r)
      std::memcpy(xe + r * d, x + static_cast<int64_t>(rows[static_cast<size_t>(r)]) * d,
                  sizeof(float) * static_cast<size_t>(d));
    run(w.experts[static_cast<size_t>(e)], m, run_rows, rw.data());
    for (int64_t r = 0; r < m; ++r) {
      float* a = acc + static_cast<int64_t>(rows[static_cast<size_t>(r)]) * d;
      for (int64_t kk = 0; kk < d; ++kk) a[kk] += ye[r * d + kk];
    }
  }
  std::memcpy(xe, x, sizeof(float) * static_cast<size_t>(n * d));
  run(w.shared, n, ch.seg_rows, nullptr);
  for (int64_t i = 0; i < n * d; ++i) y[i] = cpu::round_bf16(acc[i] + ye[i]);
}

V41Model::~V41Model() = default;

Result<std::unique_ptr<V41Model>> V41Model::load(const std::string& dir,
                                                 const V41Options& options) {
  auto config = load_v41_config(dir);
  if (!config.ok()) return config.error();
  auto ckpt = Checkpoint::open(dir);
  if (!ckpt.ok()) return ckpt.error();
  std::unique_ptr<V41Model> m(new V41Model());
  m->config_ = std::move(config.value());
  m->checkpoint_ = std::move(ckpt.value());
  auto weights = load_v41_weights(m->config_, m->checkpoint_);
  if (!weights.ok()) return weights.error();
  m->weights_ = std::move(weights.value());
  m->notes_ = m->weights_.notes;
  const V41Config& c = m->config_;
  m->main_rope_ = make_rope_table(c.main_rope, c.rope_dim);
  m->compress_rope_ = make_rope_table(c.compress_rope, c.rope_dim);
  m->pool_ = std::make_unique<cpu::ThreadPool>(options.threads);
  m->ws_ = std::make_unique<V41Workspace>();
  if (!c.engram_layer_ids.empty()) {
    auto parts = std::make_unique<V41EngramParts>();
    parts->config = engram_config(c);
    auto map = load_engram_token_map(dir + "/tokenizer.json", 0);
    if (!map.ok()) return Error{"Engram needs the tokenizer: " + map.error().message};
    auto layout = make_engram_layout(parts->config, std::move(map.value()));
    if (!layout.ok()) return layout.error();
    parts->layout = std::move(layout.value());
    for (int layer : parts->layout.layer_ids) {
      auto ew = load_engram_weights(m->checkpoint_, parts->config, parts->layout, layer);
      if (!ew.ok()) return ew.error();
      parts->weights.push_back(std::move(ew.value()));
    }
    m->engram_ = std::move(parts);
  }
  return m;
}

V41State V41Model::new_state(bool packed) const {
  const V41Config& c = config_;
  V41State s;
  s.layers.resize(static_cast<size_t>(c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) {
    if (!c.is_kv_source(l)) continue;
    V41LayerState& ls = s.layers[static_cast<size_t>(l)];
    init_v41_store(ls.compressed, packed ? EntryFormat::Fp4E4m3 : EntryFormat::F32, c.head_dim,
                   c.ratio(l));
    if (c.is_index_source(l))
      init_v41_store(ls.index_keys, packed ? EntryFormat::Mxfp4 : EntryFormat::F32,
                     c.index_head_dim, c.ratio(l));
  }
  return s;
}

namespace {
constexpr int64_t kMaxChunk = 512;  // longer inputs run as chunked prefill through the state
}

Status V41Model::forward(V41State& state, std::span<const int32_t> ids,
                         std::span<const int64_t> logit_rows, float* logits, float* main_hidden) {
  const V41BatchSequence one{&state, ids, logit_rows, logits};
  return run_batch(std::span(&one, 1), main_hidden);
}

Status V41Model::forward_batch(std::span<const V41BatchSequence> batch) {
  return run_batch(batch, nullptr);
}

Status V41Model::run_batch(std::span<const V41BatchSequence> batch, float* main_hidden) {
  const V41Config& c = config_;
  for (size_t i = 0; i < batch.size(); ++i) {
    const V41BatchSequence& b = batch[i];
    if (!b.state || static_cast<int64_t>(b.state->layers.size()) != c.num_layers)
      return Error{"the state does not belong to this model"};
    for (size_t k = 0; k < i; ++k)
      if (batch[k].state == b.state) return Error{"a batch names the same sequence state twice"};
    for (int32_t id : b.ids)
      if (id < 0 || id >= c.vocab_size)
        return Error{"token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                     std::to_string(c.vocab_size) + ")"};
    const int64_t total = static_cast<int64_t>(b.ids.size());
    for (int64_t r : b.logit_rows)
      if (r < 0 || r >= total)
        return Error{"logit row " + std::to_string(r) + " is outside the input"};
  }
  if (main_hidden && batch.size() != 1)
    return Error{"the DSpark stream means are written for a batch of one only"};
  const int hc = c.hc_mult;
  const int64_t d = c.hidden_size, V = c.vocab_size;
  std::vector<int> targets;
  if (main_hidden) {
    targets = c.dspark_target_layer_ids;
    std::sort(targets.begin(), targets.end());
  }
  const int64_t mh_stride = static_cast<int64_t>(targets.size()) * d;
  V41Workspace& ws = *ws_;
  // Rounds: each takes the next piece of at most kMaxChunk tokens of every unfinished sequence.
  for (int64_t start = 0;; start += kMaxChunk) {
    if (!collect_round(batch, start, kMaxChunk, V, ws.segs, ws.seg_rows, ws.step_ids,
                       ws.logit_rows))
      break;
    const int64_t n = static_cast<int64_t>(ws.step_ids.size());
    ws.row_seg.resize(static_cast<size_t>(n));
    ws.row_pos.resize(static_cast<size_t>(n));
    for (size_t si = 0; si < ws.segs.size(); ++si) {
      const V41Segment& sg = ws.segs[si];
      for (int64_t t = 0; t < sg.n; ++t) {
        ws.row_seg[static_cast<size_t>(sg.row0 + t)] = static_cast<int32_t>(si);
        ws.row_pos[static_cast<size_t>(sg.row0 + t)] = sg.pos0 + t;
      }
    }
    V41Chunk ch{c, pool_.get(), ws,          main_rope_,        compress_rope_,
                n, ws.segs,     ws.seg_rows, ws.row_seg.data(), ws.row_pos.data()};
    float* X = ws.get(0, static_cast<size_t>(n * hc * d));
    float* u = ws.get(1, static_cast<size_t>(n * d));
    float* yv = ws.get(2, static_cast<size_t>(n * d));
    float* pre_mix = ws.get(4, static_cast<size_t>(n * hc));
    float* pre_a = ws.get(5, static_cast<size_t>(n * hc));
    float* post = ws.get(6, static_cast<size_t>(n * hc));
    float* comb = ws.get(7, static_cast<size_t>(n * hc * hc));
    float* tmp = ws.get(23, static_cast<size_t>(hc * d));
    for (int64_t t = 0; t < n; ++t) {
      cpu::dequantize_row(weights_.embed, ws.step_ids[static_cast<size_t>(t)], X + t * hc * d);
      cpu::round_bf16(X + t * hc * d, d);
      for (int j = 1; j < hc; ++j)
        std::memcpy(X + (t * hc + j) * d, X + t * hc * d, sizeof(float) * static_cast<size_t>(d));
      for (int j = 0; j < hc; ++j) pre_mix[t * hc + j] = j == 0 ? 1.0f : 0.0f;
    }
    // Engram rows of this step (every Engram layer), each segment continuing its recent ids.
    int64_t engram_stride = 0;
    if (engram_) {
      EngramLayout& lay = engram_->layout;
      engram_stride = static_cast<int64_t>(lay.n_layers()) * lay.n_cols();
      ws.engram_rows.resize(static_cast<size_t>(n * engram_stride));
      EngramHistory& hist = engram_->history;
      for (const V41Segment& sg : ws.segs) {
        // engram_fresh_history without its allocation: all look-back blocked (−1)
        hist.prev.assign(static_cast<size_t>(std::max(0, lay.max_ngram_size - 1)), -1);
        const std::vector<int32_t>& recent = sg.state->recent_ids;
        const int64_t nr = static_cast<int64_t>(recent.size());
        for (int64_t k = 0; k < nr && k < static_cast<int64_t>(hist.prev.size()); ++k) {
          const int32_t id = recent[static_cast<size_t>(nr - 1 - k)];
          hist.prev[static_cast<size_t>(k)] = id < static_cast<int32_t>(lay.token_map.size())
                                                  ? lay.token_map[static_cast<size_t>(id)]
                                                  : -1;
        }
        if (Status st = engram_hash_rows(lay, ws.step_ids.data() + sg.row0, sg.n, nullptr, hist,
                                         ws.engram_rows.data() + sg.row0 * engram_stride);
            !st.ok())
          return st;
      }
    }
    for (int l = 0; l < c.num_layers; ++l) {
      const V41BlockWeights& w = weights_.blocks[static_cast<size_t>(l)];
      if (engram_) {
        const int li = engram_->layout.layer_index(l);
        if (li >= 0) {
          const int cols = engram_->layout.n_cols();
          for_each_run(ws.seg_rows, [&](int64_t row0, int64_t rows) {
            engram_forward(engram_->weights[static_cast<size_t>(li)], engram_->layout,
                           engram_->config,
                           ws.engram_rows.data() + row0 * engram_stride + li * cols, engram_stride,
                           rows, nullptr, X + row0 * hc * d, engram_->scratch, pool_.get());
          });
        }
      }
      if (main_hidden) {  // a batch of one: step row t is chunk row t
        const auto it = std::find(targets.begin(), targets.end(), l);
        if (it != targets.end()) {
          const int64_t ti = it - targets.begin();
          for (int64_t t = 0; t < n; ++t) {
            float* out = main_hidden + (start + t) * mh_stride + ti * d;
            for (int64_t k = 0; k < d; ++k) {
              float s = 0.0f;
              for (int j = 0; j < hc; ++j) s += X[(t * hc + j) * d + k];
              out[k] = cpu::round_bf16(s / static_cast<float>(hc));
            }
          }
        }
      }
      // attention: collapse with the previous sublayer's pre, mixes from this input
      hc_mixes(ch, X, w.hc_attn_fn, w.hc_attn_scale, w.hc_attn_base, pre_a, post, comb);
      hc_collapse(X, pre_mix, n, hc, d, u);
      v41_rms_norm(u, n, d, w.attn_norm.data(), c.rms_eps, u);
      v41_attention(ch, l, w, u, yv);
      hc_expand(X, yv, post, comb, n, hc, d, tmp);
      // MoE: collapse with the attention's pre
      hc_mixes(ch, X, w.hc_ffn_fn, w.hc_ffn_scale, w.hc_ffn_base, pre_mix, post, comb);
      hc_collapse(X, pre_a, n, hc, d, u);
      v41_rms_norm(u, n, d, w.ffn_norm.data(), c.rms_eps, u);
      v41_moe(ch, w, u, yv);
      hc_expand(X, yv, post, comb, n, hc, d, tmp);
    }
    // Head at the requested rows: one row each, packed into GEMV runs.
    const int64_t nl = static_cast<int64_t>(ws.logit_rows.size());
    if (nl > 0) {
      float* uh = ws.get(22, static_cast<size_t>(nl * d));
      float* lg = ws.get(31, static_cast<size_t>(nl * V));
      for (int64_t k = 0; k < nl; ++k) {
        const int64_t r = ws.logit_rows[static_cast<size_t>(k)].row;
        hc_collapse(X + r * hc * d, pre_mix + r * hc, 1, hc, d, uh + k * d);
        v41_rms_norm(uh + k * d, 1, d, weights_.norm.data(), c.rms_eps, uh + k * d);
      }
      ws.head_rows.assign(static_cast<size_t>(nl), 1);
      v41_plain_rows(ch, uh, ws.head_rows, weights_.head, lg);
      for (int64_t k = 0; k < nl; ++k)
        std::memcpy(ws.logit_rows[static_cast<size_t>(k)].out, lg + k * V,
                    sizeof(float) * static_cast<size_t>(V));
    }
    // Advance the sequences.
    const int keep = std::max(0, c.engram_max_ngram_size - 1);
    for (const V41Segment& sg : ws.segs) {
      V41State& state = *sg.state;
      state.position += sg.n;
      for (int64_t t = 0; t < sg.n; ++t)
        state.recent_ids.push_back(ws.step_ids[static_cast<size_t>(sg.row0 + t)]);
      if (static_cast<int>(state.recent_ids.size()) > keep)
        state.recent_ids.erase(state.recent_ids.begin(), state.recent_ids.end() - keep);
    }
  }
  return Status::Ok();
}

}  // namespace deepinfer::model::v41
