// CudaV41Model: loading (weights uploaded as shipped), state and scratch, the forward driver
// (embedding, Engram, lagged mHC around attention and MoE, the head) and the MoE sublayer, in the
// order of src/model/v41_model.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>

#include "backend/cuda/sampling.cuh"
#include "backend/cuda/v41_device.cuh"
#include "backend/cuda/weight_upload.cuh"
#include "common/progress.h"
#include "model/rope.h"
#include "model/v41_engram.h"

namespace deepinfer::cuda {

using model::v41::V41Config;

const float* CudaV41Model::Impl::upload_floats(const float* p, size_t n) {
  DeviceArray<uint8_t> b;
  b.upload(exec, reinterpret_cast<const uint8_t*>(p), n * sizeof(float));
  weight_bytes += static_cast<int64_t>(b.bytes());
  const float* d = reinterpret_cast<const float*>(b.ptr);
  blobs.push_back(std::move(b));
  return d;
}

const float* CudaV41Model::Impl::upload_floats(const std::vector<float>& v) {
  return v.empty() ? nullptr : upload_floats(v.data(), v.size());
}

DevWeight CudaV41Model::Impl::upload_weight(const cpu::WeightView& w) {
  if (!w.data) return DevWeight{};
  return cuda::upload_weight(exec, w, blobs, weight_bytes);
}

Status CudaV41Model::Impl::upload(const V41Config& config, const model::v41::V41Weights& w,
                                  const model::v41::V41EngramParts* engram_parts) {
  cfg = config;
  const V41Config& c = cfg;
  for (int l = 0; l < c.num_layers; ++l)
    if (c.ratio(l) < 0 || c.ratio(l) > 2)
      return Error{"CUDA V4.1: compress ratio " + std::to_string(c.ratio(l)) + " is not supported"};
  if (!c.engram_layer_ids.empty() && !engram_parts)
    return Error{"CUDA V4.1: the config has Engram layers but no Engram tables were given"};
  if (c.scoring_func == "sqrtsoftplus") {
    scoring = 0;
  } else if (c.scoring_func == "sigmoid") {
    scoring = 1;
  } else if (c.scoring_func == "softmax") {
    scoring = 2;
  } else {
    return Error{"CUDA V4.1: unknown scoring_func " + c.scoring_func};
  }
  embed = upload_weight(w.embed);
  head = upload_weight(w.head);
  norm = upload_floats(w.norm);
  // RoPE cos/sin for every position, made by the CPU's own function (the same values).
  const int pairs = c.rope_dim / 2;
  auto tables = [&](const model::RopeConfig& rc, const float*& cs, const float*& sn) {
    const model::RopeTable t = model::make_rope_table(rc, c.rope_dim);
    std::vector<float> vc(static_cast<size_t>(opt.max_context * pairs)), vs(vc.size());
    for (int64_t p = 0; p < opt.max_context; ++p)
      model::rope_cos_sin(t, p, pairs, vc.data() + p * pairs, vs.data() + p * pairs);
    cs = upload_floats(vc);
    sn = upload_floats(vs);
  };
  tables(c.main_rope, main_cos, main_sin);
  tables(c.compress_rope, comp_cos, comp_sin);
  blocks.resize(w.blocks.size());
  std::optional<ProgressBar> bar;
  if (opt.progress) bar.emplace("upload to the GPU", w.blocks.size(), "layers");
  for (size_t i = 0; i < w.blocks.size(); ++i) {
    if (bar && i > 0) bar->advance();
    const model::v41::V41BlockWeights& b = w.blocks[i];
    V41DevBlock& d = blocks[i];
    d.hc_attn_fn = upload_weight(b.hc_attn_fn);
    d.hc_ffn_fn = upload_weight(b.hc_ffn_fn);
    d.hc_attn_base = upload_floats(b.hc_attn_base);
    d.hc_ffn_base = upload_floats(b.hc_ffn_base);
    d.hc_attn_scale = upload_floats(b.hc_attn_scale);
    d.hc_ffn_scale = upload_floats(b.hc_ffn_scale);
    d.attn_norm = upload_floats(b.attn_norm);
    d.ffn_norm = upload_floats(b.ffn_norm);
    d.attn_sink = upload_floats(b.attn_sink);
    d.wq_a = upload_weight(b.wq_a);
    d.wq_b = upload_weight(b.wq_b);
    d.wkv = upload_weight(b.wkv);
    d.wo_b = upload_weight(b.wo_b);
    {  // wo_a holds bf16 values: ship them as bf16 bits
      std::vector<uint16_t> bits(b.wo_a.size());
      for (size_t k = 0; k < bits.size(); ++k) {
        uint32_t u;
        std::memcpy(&u, &b.wo_a[k], 4);
        bits[k] = static_cast<uint16_t>(u >> 16);
      }
      cpu::WeightView v;
      v.format = cpu::WeightFormat::BF16;
      v.data = bits.data();
      v.out = static_cast<int64_t>(c.o_groups) * c.o_lora_rank;
      v.in = static_cast<int64_t>(c.n_heads) * c.head_dim / c.o_groups;
      d.wo_a = upload_weight(v);
    }
    d.q_norm = upload_floats(b.q_norm);
    d.kv_norm = upload_floats(b.kv_norm);
    d.comp_wkv = upload_weight(b.comp_wkv);
    d.comp_wgate = upload_weight(b.comp_wgate);
    d.comp_norm = upload_floats(b.comp_norm);
    d.idx_wq_b = upload_weight(b.idx_wq_b);
    d.idx_weights_proj = upload_weight(b.idx_weights_proj);
    d.idx_wk = upload_weight(b.idx_wk);
    d.idx_k_norm = upload_floats(b.idx_k_norm);
    d.gate = upload_weight(b.gate);
    d.gate_bias = upload_floats(b.gate_bias);
    auto routed = [&](int which) {
      std::vector<DevWeight> host;
      for (const model::v41::V41Expert& e : b.experts)
        host.push_back(upload_weight(which == 1 ? e.w1 : which == 2 ? e.w2 : e.w3));
      DeviceArray<uint8_t> arr;
      arr.upload(exec, reinterpret_cast<const uint8_t*>(host.data()),
                 host.size() * sizeof(DevWeight));
      const DevWeight* p = reinterpret_cast<const DevWeight*>(arr.ptr);
      blobs.push_back(std::move(arr));
      if (!host.empty()) {
        d.routed_format = host[0].format;
        d.routed_quantized = host[0].quantized();
      }
      return p;
    };
    d.r1 = routed(1);
    d.r2 = routed(2);
    d.r3 = routed(3);
    d.s1 = upload_weight(b.shared.w1);
    d.s2 = upload_weight(b.shared.w2);
    d.s3 = upload_weight(b.shared.w3);
  }
  if (bar) {
    bar->advance();
    bar->finish();
  }
  has_engram = engram_parts != nullptr;
  if (has_engram) {  // the hash needs the layout on the host: a copy (the CPU model may go)
    eg_layout = engram_parts->layout;
    eg_eps = static_cast<float>(engram_parts->config.norm_eps);
    for (const model::v41::EngramWeights& ew : engram_parts->weights) {
      V41DevEngram d;
      const int64_t hd = eg_layout.head_dim;
      DeviceArray<uint8_t> t, s;
      t.upload(exec, ew.table, static_cast<size_t>(ew.table_rows * hd));
      s.upload(exec, ew.scale, static_cast<size_t>(ew.table_rows * (hd / 32)));
      d.table = t.ptr;
      d.scale = s.ptr;
      weight_bytes += static_cast<int64_t>(t.bytes() + s.bytes());
      blobs.push_back(std::move(t));
      blobs.push_back(std::move(s));
      d.table_rows = ew.table_rows;
      d.wkv = upload_weight(ew.wkv);
      d.qk = upload_floats(ew.qk);
      engram_layers.push_back(d);
    }
  }
  return Status::Ok();
}

CudaSlotBytes cuda_v41_slot_bytes(const V41Config& c, int64_t max_context) {
  CudaSlotBytes b;
  const int64_t D = c.head_dim, Di = c.index_head_dim, f = sizeof(float);
  for (int l = 0; l < c.num_layers; ++l) {
    b.bounded += int64_t{c.sliding_window} * D * f;
    if (!c.is_kv_source(l) || c.ratio(l) == 0) continue;
    const int r = c.ratio(l);
    const int64_t row = (D + (c.is_index_source(l) ? Di : 0)) * f;
    b.entries += max_context / r * row;
    b.entry_bytes_per_position += static_cast<double>(row) / r;
    if (r > 1) b.bounded += 2 * int64_t{r} * D * f;
  }
  return b;
}

void CudaV41Model::Impl::allocate() {
  const V41Config& c = cfg;
  const int64_t S = opt.max_sequences, ctx = opt.max_context, D = c.head_dim;
  const int64_t d = c.hidden_size, hc = c.hc_mult, k = c.experts_per_token;
  const int64_t inter = c.moe_intermediate, Di = c.index_head_dim;
  layers.resize(static_cast<size_t>(c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) {
    V41DevLayer& L = layers[static_cast<size_t>(l)];
    L.ring.allocate(exec, static_cast<size_t>(S * c.sliding_window * D));
    state_bytes += static_cast<int64_t>(L.ring.bytes());
    if (!c.is_kv_source(l) || c.ratio(l) == 0) continue;
    const int r = c.ratio(l);
    L.max_entries = ctx / r;
    L.entries.allocate(exec, static_cast<size_t>(S * L.max_entries * D));
    state_bytes += static_cast<int64_t>(L.entries.bytes());
    if (c.is_index_source(l)) {
      L.keys.allocate(exec, static_cast<size_t>(S * L.max_entries * Di));
      state_bytes += static_cast<int64_t>(L.keys.bytes());
    }
    if (r > 1) {
      L.tail_kv.allocate(exec, static_cast<size_t>(S * r * D));
      L.tail_score.allocate(exec, static_cast<size_t>(S * r * D));
      exec.fill_zero(L.tail_kv.ptr, L.tail_kv.bytes());
      exec.fill_zero(L.tail_score.ptr, L.tail_score.bytes());
      state_bytes += static_cast<int64_t>(2 * L.tail_kv.bytes());
    }
  }
  positions.assign(static_cast<size_t>(S), 0);
  recent.assign(static_cast<size_t>(S), {});

  N = std::max<int64_t>(opt.max_chunk_tokens, S);
  const int64_t H = c.n_heads, Hi = c.index_n_heads, G = c.o_groups;
  const int64_t e_in =
      has_engram ? static_cast<int64_t>(eg_layout.n_cols()) * eg_layout.head_dim : 0;
  const int64_t widest = std::max({hc * d, k * inter, H * D, G * c.o_lora_rank, e_in,
                                   static_cast<int64_t>(c.q_lora_rank), Hi * Di});
  const int bs = std::max(c.candidate_block_size, 1);
  const int cr = c.candidate_source_layer >= 0 ? std::max(1, c.ratio(c.candidate_source_layer)) : 1;
  cand_stride = (ctx / cr + bs - 1) / bs + 1;
  int64_t fl = 0;
  auto f = [&](DeviceArray<float>& a, int64_t n) {
    a.allocate(exec, static_cast<size_t>(std::max<int64_t>(n, 1)));
    fl += static_cast<int64_t>(a.bytes());
  };
  f(X, N * hc * d), f(X2, N * hc * d), f(u, N * d), f(yv, N * d), f(mix, N * (2 + hc) * hc);
  f(pre_mix, N * hc), f(pre_a, N * hc), f(post, N * hc), f(comb, N * hc * hc);
  f(xq, N * widest), f(qr, N * c.q_lora_rank), f(q, N * H * D), f(kv, N * D), f(ca, N * D);
  f(cg, N * D), f(lat, N * D), f(kbuf, N * Di), f(iq, N * Hi * Di), f(wts, N * Hi);
  f(scores, N * ctx), f(bscore, N * cand_stride), f(o, N * H * D), f(z, N * G * c.o_lora_rank);
  f(gsc, N * c.n_routed_experts), f(wsel, N * k), f(h1, N * k * inter), f(h3, N * k * inter);
  f(ye, N * k * d), f(ys, N * d), f(sh1, N * inter), f(sh3, N * inter), f(emb, N * e_in);
  f(ekv, N * (hc + 1) * d), f(xh, N * hc * d), f(ph, N * hc), f(uh, N * d);
  f(lg, N * c.vocab_size), f(rss, N);
  const int64_t slots = c.sliding_window + c.index_topk;  // attention: logits, tile rescales
  f(alog, N * H * slots), f(arsc, N * H * ((slots + 63) / 64)), f(aden, N * H);
  topk.allocate(exec, static_cast<size_t>(N * std::max(c.index_topk, 1)));
  bpick.allocate(exec, static_cast<size_t>(N * cand_stride));
  sel.allocate(exec, static_cast<size_t>(N * k));
  meta.allocate(exec, static_cast<size_t>(20 * N));
  amax.allocate(exec, static_cast<size_t>(N));
  sampled.allocate(exec, static_cast<size_t>(N));
  sample_specs.allocate(exec, static_cast<size_t>(N));
  cand.allocate(exec, static_cast<size_t>(N * cand_stride));
  pick_flags.allocate(exec, static_cast<size_t>(N * ctx));
  const int64_t e_stride =
      has_engram ? static_cast<int64_t>(eg_layout.n_layers()) * eg_layout.n_cols() : 0;
  erows.allocate(exec, static_cast<size_t>(std::max<int64_t>(N * e_stride, 1)));
  workspace_bytes =
      fl + static_cast<int64_t>(topk.bytes() + bpick.bytes() + sel.bytes() + meta.bytes() +
                                amax.bytes() + cand.bytes() + pick_flags.bytes() + erows.bytes());
  host_meta.reserve(static_cast<size_t>(20 * N));
}

void CudaV41Model::Impl::moe(int layer, const V41Step& st, const float* x, float* y) {
  Exec& e = exec;
  const V41Config& c = cfg;
  const V41DevBlock& w = blocks[static_cast<size_t>(layer)];
  const int64_t n = st.n, d = c.hidden_size, inter = c.moe_intermediate;
  const int E = c.n_routed_experts, k = c.experts_per_token;
  linear(e, x, d, n, w.gate, gsc.ptr, E, false, nullptr);
  v41::Route rt;
  rt.E = E, rt.k = k, rt.scoring = scoring, rt.temp = static_cast<float>(c.gate_temp);
  rt.routed_scaling = static_cast<float>(c.routed_scaling), rt.norm = c.norm_topk_prob;
  rt.bias = w.gate_bias;
  v41::moe_route(e, rt, gsc.ptr, n, sel.ptr, wsel.ptr);
  const float lim = static_cast<float>(c.swiglu_limit);
  // Routed experts per (token, k) slot; quantized experts take the input's FP8 values per 32.
  const float* xin = x;
  if (w.routed_quantized) {
    float* xqp = xq.ptr;
    e.each(n * d, [=] DI_HD(int64_t i) { xqp[i] = x[i]; });
    v41::fp8_quant(e, xqp, n, d, 32);
    xin = xqp;
  }
  const int64_t slots = n * k;
  linear_experts(e, xin, false, slots, k, w.r1, sel.ptr, h1.ptr, inter, inter, d, true, false,
                 w.routed_format, nullptr);
  linear_experts(e, xin, false, slots, k, w.r3, sel.ptr, h3.ptr, inter, inter, d, true, false,
                 w.routed_format, nullptr);
  if (!w.routed_quantized) {
    round_bf16(e, h1.ptr, slots * inter);
    round_bf16(e, h3.ptr, slots * inter);
  }
  v41::swiglu(e, h1.ptr, h3.ptr, slots, inter, lim, wsel.ptr);
  const float* hin = h1.ptr;
  if (w.routed_quantized) {
    float* xqp = xq.ptr;
    const float* hp = h1.ptr;
    e.each(slots * inter, [=] DI_HD(int64_t i) { xqp[i] = hp[i]; });
    v41::fp8_quant(e, xqp, slots, inter, 32);
    hin = xqp;
  }
  linear_experts(e, hin, true, slots, k, w.r2, sel.ptr, ye.ptr, d, d, inter, true, false,
                 w.routed_format, nullptr);
  if (!w.routed_quantized) round_bf16(e, ye.ptr, slots * d);
  // Shared expert.
  v41::linear32(e, x, d, n, w.s1, sh1.ptr, inter, true, xq.ptr);
  v41::linear32(e, x, d, n, w.s3, sh3.ptr, inter, true, xq.ptr);
  v41::swiglu(e, sh1.ptr, sh3.ptr, n, inter, lim, nullptr);
  v41::linear32(e, sh1.ptr, inter, n, w.s2, ys.ptr, d, true, xq.ptr);
  v41::moe_combine(e, ye.ptr, ys.ptr, sel.ptr, n, k, d, y);
}

Status CudaV41Model::Impl::run(std::span<const Segment> segs, std::span<const int32_t> logit_rows,
                               float* logits, int32_t* argmax_out,
                               std::span<const SampleSpec> specs, int32_t* tokens) {
  const V41Config& c = cfg;
  Exec& e = exec;
  const int hc = c.hc_mult;
  const int64_t d = c.hidden_size, V = c.vocab_size;
  int64_t n = 0;
  for (const Segment& s : segs) n += static_cast<int64_t>(s.ids.size());
  if (n == 0) return Status::Ok();
  if (n > N) return Error{"CUDA V4.1: a launch of more rows than the scratch holds"};
  // Row metadata, then each ratio's closing entries (row, slot, entry, its first position).
  std::vector<int32_t>& hm = host_meta;
  hm.assign(static_cast<size_t>(6 * n), 0);
  int64_t row = 0, max_vis = 1;
  for (const Segment& s : segs) {
    const int64_t p0 = positions[static_cast<size_t>(s.seq)];
    const int64_t len = static_cast<int64_t>(s.ids.size());
    for (int64_t t = 0; t < len; ++t, ++row) {
      hm[static_cast<size_t>(row)] = s.ids[static_cast<size_t>(t)];
      hm[static_cast<size_t>(n + row)] = s.seq;
      hm[static_cast<size_t>(2 * n + row)] = static_cast<int32_t>(p0 + t);
      hm[static_cast<size_t>(3 * n + row)] = static_cast<int32_t>(row - t);
      hm[static_cast<size_t>(4 * n + row)] = static_cast<int32_t>(p0);
      hm[static_cast<size_t>(5 * n + row)] = static_cast<int32_t>(len);
    }
    max_vis = std::max(max_vis, p0 + len);
  }
  int64_t ent_off[3] = {0, 0, 0}, n_ent[3] = {0, 0, 0};
  for (int r = 1; r <= 2; ++r) {
    ent_off[r] = static_cast<int64_t>(hm.size());
    std::vector<int32_t>& er = ent_tmp[0];
    std::vector<int32_t>& es = ent_tmp[1];
    std::vector<int32_t>& ej = ent_tmp[2];
    std::vector<int32_t>& ep = ent_tmp[3];
    for (std::vector<int32_t>* v : {&er, &es, &ej, &ep}) v->clear();
    for (int64_t t = 0; t < n; ++t) {
      const int32_t p = hm[static_cast<size_t>(2 * n + t)];
      if ((p + 1) % r != 0) continue;
      er.push_back(static_cast<int32_t>(t));
      es.push_back(hm[static_cast<size_t>(n + t)]);
      ej.push_back(p / r);
      ep.push_back(p / r * r);
    }
    n_ent[r] = static_cast<int64_t>(er.size());
    for (auto* v : {&er, &es, &ej, &ep}) hm.insert(hm.end(), v->begin(), v->end());
  }
  const int64_t lr_off = static_cast<int64_t>(hm.size());
  hm.insert(hm.end(), logit_rows.begin(), logit_rows.end());
  if (meta.count < hm.size()) meta.allocate(e, hm.size());
  e.to_device(meta.ptr, hm.data(), hm.size() * sizeof(int32_t));
  V41Step st;
  const int32_t* mp = meta.ptr;
  st.rows = Rows{mp, mp + n, mp + 2 * n, mp + 3 * n, mp + 4 * n, mp + 5 * n, n};
  st.n = n;
  st.max_visible = max_vis;
  for (int r = 1; r <= 2; ++r) st.ent[r] = mp + ent_off[r], st.n_ent[r] = n_ent[r];
  // Engram rows on the host (the hash continues each slot's recent ids), then uploaded.
  int64_t e_stride = 0;
  if (has_engram) {
    const model::v41::EngramLayout& lay = eg_layout;
    e_stride = static_cast<int64_t>(lay.n_layers()) * lay.n_cols();
    host_engram_rows.resize(static_cast<size_t>(n * e_stride));
    int64_t r0 = 0;
    for (const Segment& s : segs) {
      history.prev.assign(static_cast<size_t>(std::max(0, lay.max_ngram_size - 1)), -1);
      const std::vector<int32_t>& rec = recent[static_cast<size_t>(s.seq)];
      const int64_t nr = static_cast<int64_t>(rec.size());
      for (int64_t k = 0; k < nr && k < static_cast<int64_t>(history.prev.size()); ++k) {
        const int32_t id = rec[static_cast<size_t>(nr - 1 - k)];
        history.prev[static_cast<size_t>(k)] = id < static_cast<int32_t>(lay.token_map.size())
                                                   ? lay.token_map[static_cast<size_t>(id)]
                                                   : -1;
      }
      const int64_t len = static_cast<int64_t>(s.ids.size());
      if (Status hs = model::v41::engram_hash_rows(lay, s.ids.data(), len, nullptr, history,
                                                   host_engram_rows.data() + r0 * e_stride);
          !hs.ok())
        return hs;
      r0 += len;
    }
    e.to_device(erows.ptr, host_engram_rows.data(), host_engram_rows.size() * sizeof(int64_t));
    st.engram_rows = erows.ptr;
  }

  float* Xc = X.ptr;
  float* Xn = X2.ptr;
  const float eps = static_cast<float>(c.rms_eps);
  v41::embed_rows(e, embed, st.rows.ids, n, hc, Xc, pre_mix.ptr);
  v41::HcMix hm_p;
  hm_p.hc = hc, hm_p.iters = c.hc_sinkhorn_iters, hm_p.d = d;
  hm_p.hc_eps = static_cast<float>(c.hc_eps), hm_p.rms_eps = eps;
  const int64_t mixw = c.hc_mix();
  for (int l = 0; l < c.num_layers; ++l) {
    const V41DevBlock& w = blocks[static_cast<size_t>(l)];
    if (has_engram) {
      const int li = eg_layout.layer_index(l);
      if (li >= 0) {
        const V41DevEngram& eg = engram_layers[static_cast<size_t>(li)];
        const int cols = eg_layout.n_cols(), hd = eg_layout.head_dim;
        v41::engram_embed(e, eg.table, eg.scale, eg.table_rows, st.engram_rows + li * cols,
                          e_stride, n, cols, hd, emb.ptr);
        v41::linear32(e, emb.ptr, int64_t{cols} * hd, n, eg.wkv, ekv.ptr, (hc + 1) * d, true,
                      xq.ptr);
        v41::engram_gate(e, Xc, ekv.ptr, eg.qk, n, hc, d, eg_eps);
      }
    }
    // attention: collapse with the previous sublayer's pre, mixes from this input
    linear(e, Xc, hc * d, n, w.hc_attn_fn, mix.ptr, mixw, false, nullptr);
    hm_p.scale = w.hc_attn_scale, hm_p.base = w.hc_attn_base;
    v41::hc_mixes(e, hm_p, Xc, mix.ptr, n, pre_a.ptr, post.ptr, comb.ptr, rss.ptr);
    v41::hc_collapse(e, Xc, pre_mix.ptr, n, hc, d, u.ptr);
    v41::rms_norm_bf16(e, u.ptr, n, d, w.attn_norm, eps, u.ptr);
    attention(l, st, u.ptr, yv.ptr);
    v41::hc_expand(e, Xc, yv.ptr, post.ptr, comb.ptr, n, hc, d, Xn);
    std::swap(Xc, Xn);
    // MoE: collapse with the attention's pre
    linear(e, Xc, hc * d, n, w.hc_ffn_fn, mix.ptr, mixw, false, nullptr);
    hm_p.scale = w.hc_ffn_scale, hm_p.base = w.hc_ffn_base;
    v41::hc_mixes(e, hm_p, Xc, mix.ptr, n, pre_mix.ptr, post.ptr, comb.ptr, rss.ptr);
    v41::hc_collapse(e, Xc, pre_a.ptr, n, hc, d, u.ptr);
    v41::rms_norm_bf16(e, u.ptr, n, d, w.ffn_norm, eps, u.ptr);
    moe(l, st, u.ptr, yv.ptr);
    v41::hc_expand(e, Xc, yv.ptr, post.ptr, comb.ptr, n, hc, d, Xn);
    std::swap(Xc, Xn);
  }
  const int64_t nl = static_cast<int64_t>(logit_rows.size());
  if (nl > 0) {
    const int32_t* lr = mp + lr_off;
    gather_rows(e, Xc, lr, nl, hc * d, xh.ptr);
    gather_rows(e, pre_mix.ptr, lr, nl, hc, ph.ptr);
    v41::hc_collapse(e, xh.ptr, ph.ptr, nl, hc, d, uh.ptr);
    v41::rms_norm_bf16(e, uh.ptr, nl, d, norm, eps, uh.ptr);
    linear(e, uh.ptr, d, nl, head, lg.ptr, V, false, nullptr);
    if (argmax_out) {
      argmax_rows(e, lg.ptr, nl, V, amax.ptr);
      e.to_host(argmax_out, amax.ptr, static_cast<size_t>(nl) * sizeof(int32_t));
    }
    if (logits) e.to_host(logits, lg.ptr, static_cast<size_t>(nl * V) * sizeof(float));
    if (tokens && static_cast<int64_t>(specs.size()) == nl) {
      // After the logits copy on the same stream, so sampling may rewrite the rows in place.
      e.to_device(sample_specs.ptr, specs.data(), specs.size() * sizeof(SampleSpec));
      sample_rows(e, lg.ptr, nl, V, sample_specs.ptr, lg.ptr, sampled.ptr);
      e.to_host(tokens, sampled.ptr, static_cast<size_t>(nl) * sizeof(int32_t));
    }
  }
  // Advance the slots.
  const int keep = std::max(0, c.engram_max_ngram_size - 1);
  for (const Segment& s : segs) {
    positions[static_cast<size_t>(s.seq)] += static_cast<int64_t>(s.ids.size());
    std::vector<int32_t>& rec = recent[static_cast<size_t>(s.seq)];
    rec.insert(rec.end(), s.ids.begin(), s.ids.end());
    if (static_cast<int>(rec.size()) > keep) rec.erase(rec.begin(), rec.end() - keep);
  }
  if (logits || argmax_out || tokens) return e.sync();
  return e.error == cudaSuccess
             ? Status::Ok()
             : Status(Error{std::string("CUDA: ") + cudaGetErrorString(e.error)});
}

// ---- public API ---------------------------------------------------------------------------------

CudaV41Model::CudaV41Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaV41Model::~CudaV41Model() = default;

Result<std::unique_ptr<CudaV41Model>> CudaV41Model::load(const std::string& dir,
                                                         const CudaModelOptions& options) {
  auto cpu = model::v41::V41Model::load(dir);
  if (!cpu.ok()) return cpu.error();
  return from_model(*cpu.value(), options);  // everything needed is copied or uploaded
}

Result<std::unique_ptr<CudaV41Model>> CudaV41Model::from_model(const model::v41::V41Model& cpu,
                                                               const CudaModelOptions& options) {
  return from_parts(cpu.config(), cpu.weights(), cpu.engram_parts(), options);
}

Result<std::unique_ptr<CudaV41Model>> CudaV41Model::from_parts(
    const V41Config& config, const model::v41::V41Weights& weights,
    const model::v41::V41EngramParts* engram, const CudaModelOptions& options) {
  if (!options.emulate && !device_available()) return Error{"CUDA V4.1: " + device_name()};
  if (options.max_sequences < 1 || options.max_context < 1 || options.max_chunk_tokens < 1)
    return Error{"CUDA V4.1: max_sequences, max_context and max_chunk_tokens must be positive"};
  auto impl = std::make_unique<Impl>();
  impl->opt = options;
  impl->exec.emulate = options.emulate;
  if (!options.emulate) impl->exec.note(cudaStreamCreate(&impl->exec.stream));
  if (Status s = impl->upload(config, weights, engram); !s.ok()) return s.error();
  impl->allocate();
  if (Status s = impl->exec.sync(); !s.ok()) return s.error();
  return std::unique_ptr<CudaV41Model>(new CudaV41Model(std::move(impl)));
}

const V41Config& CudaV41Model::config() const { return impl_->cfg; }

void CudaV41Model::reset(int seq) {
  impl_->positions[static_cast<size_t>(seq)] = 0;
  impl_->recent[static_cast<size_t>(seq)].clear();
}

int64_t CudaV41Model::position(int seq) const { return impl_->positions[static_cast<size_t>(seq)]; }

Status CudaV41Model::prefill(int seq, std::span<const int32_t> ids,
                             std::span<const int64_t> logit_rows, float* logits) {
  Impl& m = *impl_;
  if (seq < 0 || seq >= m.opt.max_sequences)
    return Error{"CUDA V4.1: no sequence slot " + std::to_string(seq)};
  const int64_t total = static_cast<int64_t>(ids.size());
  for (int32_t id : ids)
    if (id < 0 || id >= m.cfg.vocab_size)
      return Error{"token id " + std::to_string(id) + " is outside the vocabulary"};
  for (int64_t r : logit_rows)
    if (r < 0 || r >= total)
      return Error{"logit row " + std::to_string(r) + " is outside the input"};
  if (m.positions[static_cast<size_t>(seq)] + total > m.opt.max_context)
    return Error{"CUDA V4.1: the sequence would pass max_context"};
  const int64_t V = m.cfg.vocab_size, chunk = m.opt.max_chunk_tokens;
  std::vector<int32_t> rows;
  std::vector<size_t> slot;
  std::vector<float> lg;
  for (int64_t s0 = 0; s0 < total; s0 += chunk) {
    const int64_t n = std::min(chunk, total - s0);
    rows.clear();
    slot.clear();
    for (size_t k = 0; k < logit_rows.size(); ++k)
      if (logit_rows[k] >= s0 && logit_rows[k] < s0 + n)
        rows.push_back(static_cast<int32_t>(logit_rows[k] - s0)), slot.push_back(k);
    lg.resize(rows.size() * static_cast<size_t>(V));
    const Impl::Segment one{seq, ids.subspan(static_cast<size_t>(s0), static_cast<size_t>(n))};
    if (Status s = m.run(std::span(&one, 1), rows, rows.empty() ? nullptr : lg.data(), nullptr);
        !s.ok())
      return s;
    for (size_t k = 0; k < rows.size(); ++k)
      std::memcpy(logits + slot[k] * static_cast<size_t>(V), lg.data() + k * static_cast<size_t>(V),
                  sizeof(float) * static_cast<size_t>(V));
  }
  return m.exec.sync();
}

Status CudaV41Model::decode(std::span<const int> seqs, std::span<const int32_t> ids, float* logits,
                            int32_t* argmax, std::span<const SampleSpec> specs, int32_t* tokens) {
  Impl& m = *impl_;
  if (seqs.size() != ids.size()) return Error{"decode: one id per sequence"};
  if (static_cast<int64_t>(seqs.size()) > m.N) return Error{"decode: batch larger than the slots"};
  std::vector<Impl::Segment>& segs = m.decode_segs;
  std::vector<int32_t>& rows = m.decode_rows;
  segs.clear();
  rows.clear();
  for (size_t b = 0; b < seqs.size(); ++b) {
    const int s = seqs[b];
    if (s < 0 || s >= m.opt.max_sequences)
      return Error{"decode: no sequence slot " + std::to_string(s)};
    for (size_t k = 0; k < b; ++k)
      if (seqs[k] == s) return Error{"decode: a batch names the same slot twice"};
    if (ids[b] < 0 || ids[b] >= m.cfg.vocab_size)
      return Error{"decode: token id outside the vocabulary"};
    if (m.positions[static_cast<size_t>(s)] + 1 > m.opt.max_context)
      return Error{"CUDA V4.1: the sequence would pass max_context"};
    segs.push_back({s, ids.subspan(b, 1)});
    rows.push_back(static_cast<int32_t>(b));
  }
  if (!specs.empty() && specs.size() != seqs.size()) return Error{"decode: one spec per row"};
  const bool sampling = tokens && !specs.empty() && !m.exec.emulate;
  if (!logits && !argmax && !sampling) rows.clear();
  return m.run(segs, rows, logits, argmax, sampling ? specs : std::span<const SampleSpec>(),
               sampling ? tokens : nullptr);
}

Status CudaV41Model::synchronize() { return impl_->exec.sync(); }
int64_t CudaV41Model::weight_bytes() const { return impl_->weight_bytes; }
int64_t CudaV41Model::state_bytes() const { return impl_->state_bytes; }
int64_t CudaV41Model::workspace_bytes() const { return impl_->workspace_bytes; }

}  // namespace deepinfer::cuda
