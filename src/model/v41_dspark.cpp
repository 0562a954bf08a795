#include "model/v41_dspark.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backend/cpu/quant_act.h"
#include "backend/cpu/simd.h"
#include "model/official_numerics.h"
#include "model/qat32_linear.h"
#include "model/rope.h"
#include "model/tensor_reader.h"

namespace deepinfer::model::v41 {
namespace {

using cpu::round_bf16;

// Scratch slots of DSparkScratch::f.
enum : size_t {
  kMainX,
  kX,
  kResidual,
  kU,
  kY,
  kPre,
  kPost,
  kComb,
  kNextPre,
  kQr,
  kQ,
  kKv,
  kO,
  kOa,
  kMix,
  kCosSin,
  kLogits,
  kRows,
  kH1,
  kH3,
  kExpertOut,
  kMoeAcc,
  kXq,
  kBlock,
  kPreMix,
  kHeadX,
  kMarkov,
  kSlotCount,
};
static_assert(kSlotCount <= sizeof(DSparkScratch::f) / sizeof(DSparkScratch::f[0]),
              "DSparkScratch::f is too small");

float* buf(DSparkScratch& s, size_t slot, int64_t n) {
  auto& v = s.f[slot];
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}

// RMSNorm of the reference: bf16(w · (x · rsqrt(mean(x²) + eps))) per row.
void rms_norm_bf16(const float* x, int64_t rows, int64_t dim, const float* w, double eps,
                   float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float rs = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(dim)) +
                                      static_cast<float>(eps));
    for (int64_t i = 0; i < dim; ++i) y[r * dim + i] = round_bf16(w[i] * (xr[i] * rs));
  }
}

float sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }

// hc_mixes + hc_split_sinkhorn for n rows of streams X [n, hc·dim]: pre [n, hc], post [n, hc],
// comb [n, hc, hc] (comb[i·hc + j]: weight of input stream i in output stream j).
void hc_mixes(const DSparkConfig& c, const cpu::WeightView& fn, const std::vector<float>& scale,
              const std::vector<float>& base, const float* X, int64_t n, float* pre, float* post,
              float* comb, DSparkScratch& s, cpu::ThreadPool* pool) {
  const int hc = c.hc_mult;
  const int64_t width = static_cast<int64_t>(hc) * c.dim, mix = (2 + hc) * hc;
  float* m = buf(s, kMix, n * mix);
  qat32_linear(X, n, fn, m, LinearOut::Fp32, s.f[kXq], pool);
  const float eps = static_cast<float>(c.hc_eps);
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = X + r * width;
    double ss = 0;
    for (int64_t i = 0; i < width; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float rs = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(width)) +
                                      static_cast<float>(c.norm_eps));
    float* mr = m + r * mix;
    for (int64_t i = 0; i < mix; ++i) mr[i] *= rs;
    for (int j = 0; j < hc; ++j) {
      pre[r * hc + j] = sigmoid(mr[j] * scale[0] + base[static_cast<size_t>(j)]) + eps;
      post[r * hc + j] = 2.0f * sigmoid(mr[hc + j] * scale[1] + base[static_cast<size_t>(hc + j)]);
    }
    float* cb = comb + r * hc * hc;
    for (int i = 0; i < hc * hc; ++i)
      cb[i] = mr[2 * hc + i] * scale[2] + base[static_cast<size_t>(2 * hc + i)];
    for (int i = 0; i < hc; ++i) {  // softmax over j, + eps
      float mx = -INFINITY, sum = 0.0f;
      for (int j = 0; j < hc; ++j) mx = std::max(mx, cb[i * hc + j]);
      for (int j = 0; j < hc; ++j) sum += (cb[i * hc + j] = std::exp(cb[i * hc + j] - mx));
      for (int j = 0; j < hc; ++j) cb[i * hc + j] = cb[i * hc + j] / sum + eps;
    }
    auto col_norm = [&] {
      for (int j = 0; j < hc; ++j) {
        float sum = 0.0f;
        for (int i = 0; i < hc; ++i) sum += cb[i * hc + j];
        for (int i = 0; i < hc; ++i) cb[i * hc + j] /= sum + eps;
      }
    };
    col_norm();
    for (int it = 0; it < c.hc_sinkhorn_iters - 1; ++it) {
      for (int i = 0; i < hc; ++i) {
        float sum = 0.0f;
        for (int j = 0; j < hc; ++j) sum += cb[i * hc + j];
        for (int j = 0; j < hc; ++j) cb[i * hc + j] /= sum + eps;
      }
      col_norm();
    }
  }
}

// u = bf16(Σ_j pre_j · X_j) per row.
void hc_collapse(const float* X, const float* pre, int64_t n, int hc, int64_t dim, float* u) {
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < dim; ++i) {
      float acc = 0.0f;
      for (int j = 0; j < hc; ++j) acc += pre[r * hc + j] * X[(r * hc + j) * dim + i];
      u[r * dim + i] = round_bf16(acc);
    }
  }
}

// X'_j = bf16(post_j · y + Σ_i comb_ij · R_i), R = residual (the streams before the sublayer).
void hc_expand(const float* y, const float* R, const float* post, const float* comb, int64_t n,
               int hc, int64_t dim, float* X) {
  for (int64_t r = 0; r < n; ++r) {
    for (int j = 0; j < hc; ++j) {
      for (int64_t k = 0; k < dim; ++k) {
        float acc = 0.0f;
        for (int i = 0; i < hc; ++i) acc += comb[(r * hc + i) * hc + j] * R[(r * hc + i) * dim + k];
        X[(r * hc + j) * dim + k] = round_bf16(post[r * hc + j] * y[r * dim + k] + acc);
      }
    }
  }
}

// RoPE on the trailing rope_dim values of each of `rows` vectors of width `dim` at `position`
// (in fp32, stored back as bf16).
void rope_rows(const RopeTable& table, float* x, int64_t rows, int64_t dim, int rope_dim,
               int64_t position, bool inverse, float* cs) {
  const int pairs = rope_dim / 2;
  rope_cos_sin(table, position, pairs, cs, cs + pairs);
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * dim + (dim - rope_dim);
    rope_rotate(v, pairs, cs, cs + pairs, inverse);
    for (int i = 0; i < rope_dim; ++i) v[i] = round_bf16(v[i]);
  }
}

// kv = fp8q(RoPE(kv_norm(wkv · x))) for n rows at positions pos0 + r.
void window_kv(const DSparkConfig& c, const DSparkStageWeights& w, const RopeTable& rope,
               const float* x, int64_t n, int64_t pos0, float* kv, DSparkScratch& s,
               cpu::ThreadPool* pool) {
  const int64_t hd = c.head_dim;
  float* raw = buf(s, kRows, n * hd);
  qat32_linear(x, n, w.wkv, raw, LinearOut::Bf16, s.f[kXq], pool);
  rms_norm_bf16(raw, n, hd, w.kv_norm.data(), c.norm_eps, kv);
  float* cs = buf(s, kCosSin, c.rope_dim);
  for (int64_t r = 0; r < n; ++r) {
    rope_rows(rope, kv + r * hd, 1, hd, c.rope_dim, pos0 + r, false, cs);
    cpu::fp8_act_quant_inplace(kv + r * hd, hd, 32);
  }
}

// DSparkAttention at a decode step: the block x [B, dim] at positions pos+1 … pos+B attends to
// ring slots [0, min(window, pos+1)) (slot order) then to the whole block; y [B, dim].
void stage_attention(const DSparkConfig& c, const DSparkStageWeights& w, const RopeTable& rope,
                     const float* ring, int64_t pos, const float* x, float* y, DSparkScratch& s,
                     cpu::ThreadPool* pool) {
  const int64_t B = c.block_size, hd = c.head_dim, H = c.n_heads;
  float* qr_raw = buf(s, kRows, B * c.q_lora_rank);
  float* qr = buf(s, kQr, B * c.q_lora_rank);
  qat32_linear(x, B, w.wq_a, qr_raw, LinearOut::Bf16, s.f[kXq], pool);
  rms_norm_bf16(qr_raw, B, c.q_lora_rank, w.q_norm.data(), c.norm_eps, qr);
  float* q = buf(s, kQ, B * H * hd);
  qat32_linear(qr, B, w.wq_b, q, LinearOut::Bf16, s.f[kXq], pool);
  float* cs = buf(s, kCosSin, c.rope_dim);
  for (int64_t b = 0; b < B; ++b)
    rope_rows(rope, q + b * H * hd, H, hd, c.rope_dim, pos + 1 + b, false, cs);
  float* kv = buf(s, kKv, B * hd);
  window_kv(c, w, rope, x, B, pos + 1, kv, s, pool);

  const int64_t n_ring = std::min<int64_t>(c.window, pos + 1);
  const float* keys[8192];
  const int64_t n_keys = n_ring + B;
  for (int64_t k = 0; k < n_ring; ++k) keys[k] = ring + k * hd;
  for (int64_t b = 0; b < B; ++b) keys[n_ring + b] = kv + b * hd;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  float* o = buf(s, kO, B * H * hd);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      official::attend(q + (b * H + h) * hd, keys, n_keys, n_ring, n_ring,
                       w.attn_sink[static_cast<size_t>(h)], scale, static_cast<int>(hd),
                       o + (b * H + h) * hd);
    }
    rope_rows(rope, o + b * H * hd, H, hd, c.rope_dim, pos + 1 + b, true, cs);
  }
  // wo_a: block-diagonal over groups (bf16 einsum), then wo_b.
  const int64_t G = c.o_groups, R = c.o_lora_rank, gin = H * hd / G;
  float* oa = buf(s, kOa, B * G * R);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t g = 0; g < G; ++g) {
      const float* og = o + b * H * hd + g * gin;
      for (int64_t r = 0; r < R; ++r) {
        oa[(b * G + g) * R + r] = round_bf16(cpu::dot(og, w.wo_a.data() + (g * R + r) * gin, gin));
      }
    }
  }
  qat32_linear(oa, B, w.wo_b, y, LinearOut::Bf16, s.f[kXq], pool);
}

float route_score(const std::string& fn, float z) {
  if (fn == "sigmoid") return sigmoid(z);
  if (fn == "softmax") return z;  // normalised over the experts below
  const float sp = z > 20.0f ? z : std::log1p(std::exp(z));
  return std::sqrt(sp);
}

// y = bf16(w2 · bf16(row_w · silu(min(g, L)) · clamp(u, ±L))) for m rows.
void run_expert(const DSparkConfig& c, const DSparkExpert& e, const float* x, int64_t m,
                const float* row_w, float* y, DSparkScratch& s, cpu::ThreadPool* pool) {
  const int64_t inter = e.w1.out;
  float* h1 = buf(s, kH1, m * inter);
  float* h3 = buf(s, kH3, m * inter);
  qat32_linear(x, m, e.w1, h1, LinearOut::Bf16, s.f[kXq], pool);
  qat32_linear(x, m, e.w3, h3, LinearOut::Bf16, s.f[kXq], pool);
  const float L = static_cast<float>(c.swiglu_limit);
  for (int64_t i = 0; i < m * inter; ++i) {
    float g = h1[i], u = h3[i];
    if (L > 0) {
      u = std::clamp(u, -L, L);
      g = std::min(g, L);
    }
    float v = g / (1.0f + std::exp(-g)) * u;
    if (row_w) v = row_w[i / inter] * v;
    h1[i] = round_bf16(v);
  }
  qat32_linear(h1, m, e.w2, y, LinearOut::Bf16, s.f[kXq], pool);
}

// MoE of a stage on x [n, dim] → y [n, dim] (bf16): routed experts in id order, then shared.
void stage_moe(const DSparkConfig& c, const DSparkStageWeights& w, const float* x, int64_t n,
               float* y, DSparkScratch& s, cpu::ThreadPool* pool) {
  const int64_t E = c.n_routed_experts, K = c.experts_per_token, d = c.dim;
  float* logits = buf(s, kMix, n * E);
  qat32_linear(x, n, w.gate, logits, LinearOut::Fp32, s.f[kXq], pool);
  std::vector<int32_t>& sel = s.idx;
  sel.assign(static_cast<size_t>(n * K), 0);
  float* weights = buf(s, kPre, n * K);
  float scores[1024];
  int32_t order[1024];
  for (int64_t t = 0; t < n; ++t) {
    float* lg = logits + t * E;
    for (int64_t e = 0; e < E; ++e) lg[e] /= static_cast<float>(c.gate_temp);
    if (c.score_func == "softmax") {
      float mx = -INFINITY, sum = 0.0f;
      for (int64_t e = 0; e < E; ++e) mx = std::max(mx, lg[e]);
      for (int64_t e = 0; e < E; ++e) sum += (scores[e] = std::exp(lg[e] - mx));
      for (int64_t e = 0; e < E; ++e) scores[e] /= sum;
    } else {
      for (int64_t e = 0; e < E; ++e) scores[e] = route_score(c.score_func, lg[e]);
    }
    std::iota(order, order + E, 0);
    std::stable_sort(order, order + E, [&](int32_t a, int32_t b) {
      return scores[a] + w.gate_bias[static_cast<size_t>(a)] >
             scores[b] + w.gate_bias[static_cast<size_t>(b)];
    });
    float sum = 0.0f;
    for (int64_t k = 0; k < K; ++k) sum += scores[order[k]];
    for (int64_t k = 0; k < K; ++k) {
      float v = scores[order[k]];
      if (c.norm_topk_prob && K > 1) v /= sum + 1e-20f;
      weights[t * K + k] = v * static_cast<float>(c.route_scale);
      sel[static_cast<size_t>(t * K + k)] = order[k];
    }
  }
  float* acc = buf(s, kMoeAcc, n * d);
  std::fill(acc, acc + n * d, 0.0f);
  float* rows = buf(s, kRows, n * d);
  float* out = buf(s, kExpertOut, n * d);
  float row_w[1024];
  int64_t row_t[1024];
  for (int64_t e = 0; e < E; ++e) {
    int64_t m = 0;
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t k = 0; k < K; ++k) {
        if (sel[static_cast<size_t>(t * K + k)] != e) continue;
        std::memcpy(rows + m * d, x + t * d, sizeof(float) * static_cast<size_t>(d));
        row_w[m] = weights[t * K + k];
        row_t[m++] = t;
      }
    }
    if (m == 0) continue;
    run_expert(c, w.experts[static_cast<size_t>(e)], rows, m, row_w, out, s, pool);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t k = 0; k < d; ++k) acc[row_t[i] * d + k] += out[i * d + k];
  }
  run_expert(c, w.shared, x, n, nullptr, out, s, pool);
  for (int64_t i = 0; i < n * d; ++i) y[i] = round_bf16(acc[i] + out[i]);
}

// One stage on the block streams X [B, hc, dim] in place; pre: the collapse weights from the
// previous stage (one-hot for the first), replaced by this stage's FFN pre.
void stage_forward(const DSparkConfig& c, const DSparkStageWeights& w, const RopeTable& rope,
                   const float* ring, int64_t pos, float* X, float* pre, DSparkScratch& s,
                   cpu::ThreadPool* pool) {
  const int64_t B = c.block_size, hc = c.hc_mult, d = c.dim;
  float* R = buf(s, kResidual, B * hc * d);
  float* u = buf(s, kU, B * d);
  float* un = buf(s, kX, B * d);
  float* y = buf(s, kY, B * d);
  float* attn_pre = buf(s, kNextPre, B * hc);
  float* post = buf(s, kPost, B * hc);
  float* comb = buf(s, kComb, B * hc * hc);
  std::memcpy(R, X, sizeof(float) * static_cast<size_t>(B * hc * d));
  hc_mixes(c, w.hc_attn_fn, w.hc_attn_scale, w.hc_attn_base, X, B, attn_pre, post, comb, s, pool);
  hc_collapse(X, pre, B, static_cast<int>(hc), d, u);
  rms_norm_bf16(u, B, d, w.attn_norm.data(), c.norm_eps, un);
  stage_attention(c, w, rope, ring, pos, un, y, s, pool);
  hc_expand(y, R, post, comb, B, static_cast<int>(hc), d, X);

  std::memcpy(R, X, sizeof(float) * static_cast<size_t>(B * hc * d));
  hc_mixes(c, w.hc_ffn_fn, w.hc_ffn_scale, w.hc_ffn_base, X, B, pre, post, comb, s, pool);
  hc_collapse(X, attn_pre, B, static_cast<int>(hc), d, u);
  rms_norm_bf16(u, B, d, w.ffn_norm.data(), c.norm_eps, un);
  stage_moe(c, w, un, B, y, s, pool);
  hc_expand(y, R, post, comb, B, static_cast<int>(hc), d, X);
}

RopeTable stage_rope(const DSparkConfig& c) {
  RopeConfig rc;
  rc.theta = c.rope_theta;
  rc.yarn = false;
  return make_rope_table(rc, c.rope_dim);
}

// main_x = main_norm(main_proj(main_hidden)) for n rows.
void main_x_rows(const DSparkWeights& w, const DSparkConfig& c, const float* main_hidden, int64_t n,
                 float* main_x, DSparkScratch& s, cpu::ThreadPool* pool) {
  float* raw = buf(s, kRows, n * c.dim);
  qat32_linear(main_hidden, n, w.main_proj, raw, LinearOut::Bf16, s.f[kXq], pool);
  rms_norm_bf16(raw, n, c.dim, w.main_norm.data(), c.norm_eps, main_x);
}

Status check_config(const DSparkConfig& c) {
  if (c.n_stages < 1 || c.block_size < 1 || c.n_targets() < 1 || c.dim < 1 || c.window < 1 ||
      c.hc_mult < 1 || c.n_heads < 1 || c.head_dim % 32 || c.o_groups < 1 ||
      c.n_heads % c.o_groups || c.n_routed_experts < 1 || c.experts_per_token < 1 ||
      c.experts_per_token > c.n_routed_experts || c.rope_dim % 2 || c.rope_dim > c.head_dim)
    return Error{"dspark: inconsistent config (stages, block, targets, heads, experts or dims)"};
  if (c.n_routed_experts > 1024 || c.block_size * c.experts_per_token > 1024 ||
      c.window + c.block_size > 8192 || c.head_dim > 4096)
    return Error{
        "dspark: config exceeds this implementation's limits (1024 experts or routed "
        "rows per block, 8192 attended keys, head_dim 4096)"};
  return Status::Ok();
}

}  // namespace

DSparkConfig dspark_config(const V41Config& v) {
  DSparkConfig c;
  c.n_stages = v.num_mtp_layers;
  c.first_layer_id = v.num_layers;
  c.block_size = v.dspark_block_size;
  c.noise_token_id = v.dspark_noise_token_id;
  c.target_layer_ids = v.dspark_target_layer_ids;
  c.markov_rank = v.dspark_markov_rank;
  c.n_routed_experts = v.dspark_n_routed_experts ? v.dspark_n_routed_experts : v.n_routed_experts;
  c.experts_per_token =
      v.dspark_experts_per_token ? v.dspark_experts_per_token : v.experts_per_token;
  c.vocab_size = v.vocab_size;
  c.dim = v.hidden_size;
  c.n_heads = v.n_heads;
  c.head_dim = v.head_dim;
  c.rope_dim = v.rope_dim;
  c.q_lora_rank = v.q_lora_rank;
  c.o_lora_rank = v.o_lora_rank;
  c.o_groups = v.o_groups;
  c.window = v.sliding_window;
  c.moe_inter = v.moe_intermediate;
  c.hc_mult = v.hc_mult;
  c.hc_sinkhorn_iters = v.hc_sinkhorn_iters;
  c.hc_eps = v.hc_eps;
  c.norm_eps = v.rms_eps;
  c.rope_theta = v.main_rope.theta;
  c.score_func = v.scoring_func;
  c.route_scale = v.routed_scaling;
  c.swiglu_limit = v.swiglu_limit;
  c.gate_temp = v.gate_temp;
  c.norm_topk_prob = v.norm_topk_prob;
  return c;
}

Result<DSparkWeights> load_dspark_weights(const Checkpoint& checkpoint, const DSparkConfig& c,
                                          const cpu::WeightView& embed,
                                          const cpu::WeightView& head) {
  if (Status st = check_config(c); !st.ok()) return st.error();
  TensorReader rd(checkpoint);
  DSparkWeights w;
  w.embed = embed;
  w.head = head;
  const int64_t d = c.dim, hc = c.hc_mult, mix = (2 + hc) * hc, hd = c.head_dim, H = c.n_heads;
  for (int s = 0; s < c.n_stages; ++s) {
    const std::string p = "mtp." + std::to_string(s) + ".";
    DSparkStageWeights st;
    st.hc_attn_fn = rd.matrix(p + "hc_attn_fn", mix, hc * d);
    st.hc_ffn_fn = rd.matrix(p + "hc_ffn_fn", mix, hc * d);
    st.hc_attn_base = rd.floats(p + "hc_attn_base", {mix});
    st.hc_ffn_base = rd.floats(p + "hc_ffn_base", {mix});
    st.hc_attn_scale = rd.floats(p + "hc_attn_scale", {3});
    st.hc_ffn_scale = rd.floats(p + "hc_ffn_scale", {3});
    st.attn_norm = rd.floats(p + "attn_norm.weight", {d});
    st.ffn_norm = rd.floats(p + "ffn_norm.weight", {d});
    st.attn_sink = rd.floats(p + "attn.attn_sink", {H});
    st.wq_a = rd.matrix(p + "attn.wq_a.weight", c.q_lora_rank, d);
    st.q_norm = rd.floats(p + "attn.q_norm.weight", {c.q_lora_rank});
    st.wq_b = rd.matrix(p + "attn.wq_b.weight", H * hd, c.q_lora_rank);
    st.wkv = rd.matrix(p + "attn.wkv.weight", hd, d);
    st.kv_norm = rd.floats(p + "attn.kv_norm.weight", {hd});
    const cpu::WeightView wo_a =
        rd.matrix(p + "attn.wo_a.weight", static_cast<int64_t>(c.o_groups) * c.o_lora_rank,
                  H * hd / c.o_groups);
    st.wo_b =
        rd.matrix(p + "attn.wo_b.weight", d, static_cast<int64_t>(c.o_groups) * c.o_lora_rank);
    st.gate = rd.matrix(p + "ffn.gate.weight", c.n_routed_experts, d);
    st.gate_bias = rd.floats(p + "ffn.gate.bias", {c.n_routed_experts});
    for (int e = 0; e < c.n_routed_experts; ++e) {
      const std::string q = p + "ffn.experts." + std::to_string(e) + ".";
      st.experts.push_back({rd.matrix(q + "w1.weight", c.moe_inter, d),
                            rd.matrix(q + "w2.weight", d, c.moe_inter),
                            rd.matrix(q + "w3.weight", c.moe_inter, d)});
    }
    const std::string q = p + "ffn.shared_experts.";
    st.shared = {rd.matrix(q + "w1.weight", c.moe_inter, d),
                 rd.matrix(q + "w2.weight", d, c.moe_inter),
                 rd.matrix(q + "w3.weight", c.moe_inter, d)};
    if (!rd.ok()) return rd.error();
    st.wo_a = dequantize_matrix(wo_a);
    w.stages.push_back(std::move(st));
  }
  w.main_proj = rd.matrix("mtp.0.main_proj.weight", d, c.n_targets() * d);
  w.main_norm = rd.floats("mtp.0.main_norm.weight", {d});
  const std::string last = "mtp." + std::to_string(c.n_stages - 1) + ".";
  w.norm = rd.floats(last + "norm.weight", {d});
  w.markov_embed = rd.matrix(last + "markov_head.embed.weight", c.vocab_size, c.markov_rank);
  w.markov_head = rd.matrix(last + "markov_head.head.weight", c.vocab_size, c.markov_rank);
  w.confidence = rd.floats(last + "confidence_head.proj.weight", {1, d + c.markov_rank});
  if (embed.out != c.vocab_size || embed.in != d || head.out != c.vocab_size || head.in != d)
    rd.fail("dspark: the main embed/head views are not [vocab, dim]");
  if (!rd.ok()) return rd.error();
  w.rope = stage_rope(c);
  return w;
}

DSparkState dspark_fresh_state(const DSparkConfig& c) {
  DSparkState s;
  s.ring.assign(static_cast<size_t>(c.n_stages),
                std::vector<float>(static_cast<size_t>(c.window) * c.head_dim, 0.0f));
  return s;
}

void dspark_stream_mean(const float* X, int64_t n, int hc, int dim, float* out,
                        int64_t out_stride) {
  for (int64_t t = 0; t < n; ++t) {
    for (int i = 0; i < dim; ++i) {
      float sum = 0.0f;
      for (int j = 0; j < hc; ++j) sum += X[(t * hc + j) * dim + i];
      out[t * out_stride + i] = round_bf16(sum / static_cast<float>(hc));
    }
  }
}

Status dspark_observe(const DSparkWeights& w, const DSparkConfig& c, DSparkState& state,
                      const float* main_hidden, int64_t n, int64_t pos0, DSparkScratch& s,
                      cpu::ThreadPool* pool) {
  if (pos0 != state.next_position)
    return Error{"dspark: observe at position " + std::to_string(pos0) + ", expected " +
                 std::to_string(state.next_position)};
  if (static_cast<int>(state.ring.size()) != c.n_stages) return Error{"dspark: state mismatch"};
  if (n <= 0) return Status::Ok();
  const RopeTable& rope = w.rope;
  const int64_t hd = c.head_dim;
  // Only the last `window` positions can stay in the rings.
  const int64_t skip = std::max<int64_t>(0, n - c.window);
  const int64_t m = n - skip;
  float* main_x = buf(s, kMainX, m * c.dim);
  main_x_rows(w, c, main_hidden + skip * c.n_targets() * c.dim, m, main_x, s, pool);
  float* kv = buf(s, kKv, m * hd);
  for (int st = 0; st < c.n_stages; ++st) {
    window_kv(c, w.stages[static_cast<size_t>(st)], rope, main_x, m, pos0 + skip, kv, s, pool);
    auto& ring = state.ring[static_cast<size_t>(st)];
    for (int64_t r = 0; r < m; ++r) {
      const int64_t slot = (pos0 + skip + r) % c.window;
      std::memcpy(ring.data() + slot * hd, kv + r * hd, sizeof(float) * static_cast<size_t>(hd));
    }
  }
  state.next_position = pos0 + n;
  return Status::Ok();
}

Status dspark_draft(const DSparkWeights& w, const DSparkConfig& c, DSparkState& state,
                    const float* main_hidden, int64_t pos, int32_t token, DSparkDraft& out,
                    DSparkScratch& s, cpu::ThreadPool* pool, DSparkSampler sampler,
                    void* sampler_user) {
  if (token < 0 || token >= c.vocab_size || c.noise_token_id < 0 ||
      c.noise_token_id >= c.vocab_size)
    return Error{"dspark: token id outside the vocabulary"};
  if (Status st = dspark_observe(w, c, state, main_hidden, 1, pos, s, pool); !st.ok()) return st;
  const RopeTable& rope = w.rope;
  const int64_t B = c.block_size, hc = c.hc_mult, d = c.dim, V = c.vocab_size;
  // The block [token, noise, …] embedded and copied into every stream.
  float* block = buf(s, kBlock, B * hc * d);
  float* row = buf(s, kLogits, d);
  for (int64_t b = 0; b < B; ++b) {
    cpu::dequantize_row(w.embed, b == 0 ? token : c.noise_token_id, row);
    for (int64_t j = 0; j < hc; ++j)
      for (int64_t i = 0; i < d; ++i) block[(b * hc + j) * d + i] = round_bf16(row[i]);
  }
  float* pre = buf(s, kPreMix, B * hc);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < hc; ++j) pre[b * hc + j] = j == 0 ? 1.0f : 0.0f;
  for (int st = 0; st < c.n_stages; ++st) {
    stage_forward(c, w.stages[static_cast<size_t>(st)], rope,
                  state.ring[static_cast<size_t>(st)].data(), pos, block, pre, s, pool);
  }
  // Head: collapse with the last FFN pre, norm, shared LM head (fp32 logits).
  float* x = buf(s, kHeadX, B * d);
  float* xn = buf(s, kX, B * d);
  hc_collapse(block, pre, B, static_cast<int>(hc), d, x);
  rms_norm_bf16(x, B, d, w.norm.data(), c.norm_eps, xn);
  out.ids.assign(static_cast<size_t>(B + 1), 0);
  out.logits.resize(static_cast<size_t>(B * V));
  out.confidence.resize(static_cast<size_t>(B));
  qat32_linear(xn, B, w.head, out.logits.data(), LinearOut::Fp32, s.f[kXq], pool);
  // Markov chain: slot b's logits gain head_m · embed_m(previous token), then pick the next one.
  const int64_t r = c.markov_rank;
  float* emb = buf(s, kMarkov, B * r);
  float* bias = buf(s, kLogits, V);
  out.ids[0] = token;
  for (int64_t b = 0; b < B; ++b) {
    cpu::dequantize_row(w.markov_embed, out.ids[static_cast<size_t>(b)], emb + b * r);
    for (int64_t i = 0; i < r; ++i) emb[b * r + i] = round_bf16(emb[b * r + i]);
    qat32_linear(emb + b * r, 1, w.markov_head, bias, LinearOut::Fp32, s.f[kXq], pool);
    float* lg = out.logits.data() + b * V;
    for (int64_t v = 0; v < V; ++v) lg[v] += bias[v];
    int32_t next = 0;
    if (sampler) {
      next = sampler(lg, V, sampler_user);
    } else {
      for (int64_t v = 1; v < V; ++v)
        if (lg[v] > lg[next]) next = static_cast<int32_t>(v);
    }
    out.ids[static_cast<size_t>(b + 1)] = next;
  }
  // Confidence: fp32 linear over [x (pre-norm), markov embed].
  for (int64_t b = 0; b < B; ++b) {
    float acc = cpu::dot(x + b * d, w.confidence.data(), d);
    acc += cpu::dot(emb + b * r, w.confidence.data() + d, r);
    out.confidence[static_cast<size_t>(b)] = acc;
  }
  return Status::Ok();
}

}  // namespace deepinfer::model::v41
