// The V4 forward of one launch on the device: rows of one or more sequence segments through every
// block (mHC, attention, MoE), then the logits of the requested rows. Mirrors src/model's
// model.cpp / block.cpp / attention.cpp / moe.cpp step for step.
#include <algorithm>
#include <cmath>

#include "backend/cuda/device_model.cuh"
#include "backend/cuda/fast_ops.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/gemv_group.cuh"
#include "backend/cuda/gemv_mma.cuh"

namespace deepinfer::cuda {
namespace {

// wo_a's G products in one split-row launch (DEEPINFER_CUDA_GROUP_WO_A=0: one launch per group).
// H200, batch 1: 1.84 vs 1.91 ms per step; the device tests pass with it.
bool group_wo_a() {
  static const bool on = env_switch("DEEPINFER_CUDA_GROUP_WO_A", true);
  return on;
}

// The shared expert on the side stream at GEMV-sized launches (moe_sublayer);
// DEEPINFER_CUDA_SHARED_OVERLAP=0 keeps it on the one stream.
bool shared_overlap() {
  static const bool on = env_switch("DEEPINFER_CUDA_SHARED_OVERLAP", true);
  return on;
}

// The attention output's inverse RoPE inside the decode P·V launch (the same bits, one launch
// fewer a layer); DEEPINFER_CUDA_PV_ROPE=0 keeps rope_round_bf16's launch.
bool pv_rope() {
  static const bool on = env_switch("DEEPINFER_CUDA_PV_ROPE", true);
  return on;
}

// The window ring's write on the side stream beside wo_a / wo_b where the attention sublayer
// forked (off its critical path); DEEPINFER_CUDA_RING_SIDE=0 keeps it after wo_b.
bool ring_write_side() {
  static const bool on = env_switch("DEEPINFER_CUDA_RING_SIDE", true);
  return on;
}

// wo_b's FP8 input written by wo_a's tensor-core group launch (the same bits, one launch fewer
// a layer); DEEPINFER_CUDA_WO_B_INPUT=0 keeps linear()'s quantization launch.
bool fused_wo_b_input() {
  static const bool on = env_switch("DEEPINFER_CUDA_WO_B_INPUT", true);
  return on;
}

// hc_post inside wo_b's one-row launch (the same bits, one launch fewer a layer);
// DEEPINFER_CUDA_WO_B_HC_POST=0 keeps hc_post's launch.
bool fused_hc_post() {
  static const bool on = env_switch("DEEPINFER_CUDA_WO_B_HC_POST", true);
  return on;
}

// The CSA indexer chain on its own stream (attention_sublayer; the same bits);
// DEEPINFER_CUDA_INDEX_STREAM=0 keeps it on the side stream.
bool index_stream_on() {
  static const bool on = env_switch("DEEPINFER_CUDA_INDEX_STREAM", true);
  return on;
}

struct XnProduct {
  const DevWeight* w;
  float* y;
  int64_t ldy;
};

bool g_attention_overlap = env_switch("DEEPINFER_CUDA_ATTN_OVERLAP", true);

}  // namespace

void set_attention_overlap(bool on) { g_attention_overlap = on; }
bool attention_overlap() { return g_attention_overlap; }

Status CudaModel::Impl::run(std::span<const Segment> segs, std::span<const int32_t> logit_rows,
                            float* logits, int32_t* argmax, std::span<const SampleSpec> specs,
                            int32_t* tokens) {
  const model::ModelConfig& c = cfg;
  const int S = opt.max_sequences;
  int64_t n = 0;
  for (const Segment& s : segs) n += static_cast<int64_t>(s.ids.size());
  if (n == 0) return Status::Ok();
  if (n > N || static_cast<int64_t>(segs.size()) > S)
    return Error{"CUDA backend: launch larger than its scratch"};
  // Row and segment metadata, closed-entry lists, logit rows: one upload.
  int32_t* hm = host_meta.data();
  const int64_t o_seg = 6 * N, o_ent = o_seg + 4 * S;
  const int64_t ent_stride = N + S;
  o_lrows = o_ent + static_cast<int64_t>(ratios.size()) * 4 * ent_stride;
  o_amax = o_lrows + N;
  int64_t r = 0;
  for (size_t g = 0; g < segs.size(); ++g) {
    const Segment& s = segs[g];
    const int64_t p0 = positions[static_cast<size_t>(s.seq)];
    const int64_t len = static_cast<int64_t>(s.ids.size());
    hm[o_seg + g] = static_cast<int32_t>(r);
    hm[o_seg + S + g] = s.seq;
    hm[o_seg + 2 * S + g] = static_cast<int32_t>(p0);
    hm[o_seg + 3 * S + g] = static_cast<int32_t>(len);
    const int64_t row0 = r;
    for (int64_t t = 0; t < len; ++t, ++r) {
      hm[r] = s.ids[static_cast<size_t>(t)];
      hm[N + r] = s.seq;
      hm[2 * N + r] = static_cast<int32_t>(p0 + t);
      hm[3 * N + r] = static_cast<int32_t>(row0);
      hm[4 * N + r] = static_cast<int32_t>(p0);
      hm[5 * N + r] = static_cast<int32_t>(len);
    }
  }
  ent_off.assign(ratios.size(), 0);
  ent_count = o_lrows + 2 * N;
  ent_max = n + static_cast<int64_t>(segs.size());
  for (size_t ri = 0; ri < ratios.size(); ++ri) {
    const int64_t ratio = ratios[ri];
    const int64_t base = o_ent + static_cast<int64_t>(ri) * 2 * ent_stride;
    int64_t k = 0;
    for (const Segment& s : segs) {
      const int64_t p0 = positions[static_cast<size_t>(s.seq)];
      const int64_t len = static_cast<int64_t>(s.ids.size());
      for (int64_t j = p0 / ratio; j < (p0 + len) / ratio; ++j, ++k) {
        hm[base + k] = s.seq;
        hm[base + ent_stride + k] = static_cast<int32_t>(j);
      }
    }
    ent_off[ri] = base;
    hm[ent_count + static_cast<int64_t>(ri)] = static_cast<int32_t>(k);
  }
  const int64_t nl = static_cast<int64_t>(logit_rows.size());
  std::copy(logit_rows.begin(), logit_rows.end(), hm + o_lrows);
  upload_tables();  // before the launch (and a graph replay) reads them
  exec.to_device(
      meta.ptr, hm,
      static_cast<size_t>(ent_count + static_cast<int64_t>(ratios.size())) * sizeof(int32_t));

  const int32_t* dm = meta.ptr;
  Rows rows{dm, dm + N, dm + 2 * N, dm + 3 * N, dm + 4 * N, dm + 5 * N, n};
  Segments sg{dm + o_seg, dm + o_seg + S, dm + o_seg + 2 * S, dm + o_seg + 3 * S,
              static_cast<int64_t>(segs.size())};
  bool one_token = nl == n;
  for (const Segment& s : segs) one_token = one_token && s.ids.size() == 1;
  for (size_t i = 0; one_token && i < logit_rows.size(); ++i)
    one_token = logit_rows[i] == static_cast<int32_t>(i);
  bool launched = false;
  // One-row steps launch programmatically dependent (exec.cuh's pdl_enabled), captured so too.
  exec.pdl_auto = n == 1;
  if (!exec.emulate && opt.cuda_graphs && one_token && !graphs_failed) {
    auto it = graphs.find(n);
    if (it == graphs.end()) {
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t ge = nullptr;
      bool ok =
          cudaStreamBeginCapture(exec.stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
      if (ok) {
        compute(rows, sg, nl);
        ok = cudaStreamEndCapture(exec.stream, &graph) == cudaSuccess && exec.error == cudaSuccess;
      }
      ok = ok && cudaGraphInstantiate(&ge, graph, 0) == cudaSuccess;
      if (graph) cudaGraphDestroy(graph);
      if (ok) {
        it = graphs.emplace(n, ge).first;
      } else {
        graphs_failed = true;
        exec.error = cudaSuccess;
        cudaGetLastError();
      }
    }
    if (it != graphs.end()) {
      exec.note(cudaGraphLaunch(it->second, exec.stream));
      launched = true;
    }
  }
  if (!launched) compute(rows, sg, nl);
  exec.pdl_auto = false;
  for (const Segment& s : segs)
    positions[static_cast<size_t>(s.seq)] += static_cast<int64_t>(s.ids.size());
  if (nl > 0) {
    const int64_t V = c.vocab_size;
    if (logits) exec.to_host(logits, lg.ptr, static_cast<size_t>(nl * V) * sizeof(float));
    if (argmax) exec.to_host(argmax, meta.ptr + o_amax, static_cast<size_t>(nl) * sizeof(int32_t));
    if (tokens && static_cast<int64_t>(specs.size()) == nl && !exec.emulate) {
      // After the logits copy on the same stream, so sampling may rewrite the rows in place.
      exec.to_device(sample_specs.ptr, specs.data(), specs.size() * sizeof(SampleSpec));
      sample_rows(exec, lg.ptr, nl, V, sample_specs.ptr, lg.ptr, sampled.ptr);
      exec.to_host(tokens, sampled.ptr, static_cast<size_t>(nl) * sizeof(int32_t));
    }
    if (logits || argmax || tokens) return exec.sync();
  }
  if (exec.error != cudaSuccess)
    return Error{std::string("CUDA: ") + cudaGetErrorString(exec.error)};
  return Status::Ok();
}

void CudaModel::Impl::compute(const Rows& rows, const Segments& segs, int64_t nl) {
  const model::ModelConfig& c = cfg;
  const int64_t n = rows.n, d = c.hidden_size, hc = c.hc_mult;
  const int32_t* dm = meta.ptr;
  embed(exec, embed_table, rows.ids, n, c.hc_mult, X.ptr);
  if (official) round_bf16(exec, X.ptr, n * hc * d);
  for (int i = 0; i < c.num_layers; ++i) block(i, rows, segs, dm);
  if (nl == 0) return;
  const int64_t V = c.vocab_size;
  gather_rows(exec, X.ptr, dm + o_lrows, nl, hc * d, Xr.ptr);
  linear(exec, Xr.ptr, hc * d, nl, hc_head_w.fn, mix.ptr, hc, official, xq.ptr);
  HcParams hp{c.hc_mult,
              c.hc_sinkhorn_iters,
              d,
              static_cast<float>(c.hc_eps),
              static_cast<float>(c.rms_eps),
              hc_head_w.base,
              hc_head_w.scale};
  hc_head(exec, hp, Xr.ptr, mix.ptr, nl, pre.ptr, hh.ptr, rss.ptr);
  rms_norm(exec, hh.ptr, nl, d, norm, static_cast<float>(c.rms_eps), hh.ptr, official, official);
  linear(exec, hh.ptr, d, nl, head, lg.ptr, V, official, xq.ptr);
  argmax_rows(exec, lg.ptr, nl, V, meta.ptr + o_amax);
}

void CudaModel::Impl::block(int layer, const Rows& rows, const Segments& segs,
                            const int32_t* entries) {
  const model::ModelConfig& c = cfg;
  const DevBlock& B = blocks[static_cast<size_t>(layer)];
  const int64_t n = rows.n, d = c.hidden_size, hc = c.hc_mult, mixw = (2 + hc) * hc;
  const float eps = static_cast<float>(c.rms_eps);
  for (int half = 0; half < 2; ++half) {
    const DevHc& H = half == 0 ? B.hc_attn : B.hc_ffn;
    HcParams hp{c.hc_mult, c.hc_sinkhorn_iters, d, static_cast<float>(c.hc_eps), eps, H.base,
                H.scale};
    linear(exec, X.ptr, hc * d, n, H.fn, mix.ptr, mixw, official, xq.ptr);
    // u and xn bf16-rounded (official) inside the norm's launch; xn quantized once for its
    // products where they are GEMV passes (the cuBLASLt ones take xn as it is); all of it one
    // launch after the sums of squares where hc_pre_norm_fused applies.
    const float* norm = half == 0 ? B.attn_norm : B.ffn_norm;
    const bool want_q =
        official && !exec.emulate && fast_kernels() && n <= gemv_max_rows() && !batch_invariant();
    xn_q = want_q ? xnq.ptr : nullptr;
    if (!hc_pre_norm_fused(exec, hp, X.ptr, mix.ptr, n, pre.ptr, post.ptr, comb.ptr, u.ptr, rss.ptr,
                           norm, eps, xn.ptr, official, official, want_q ? xnq.ptr : nullptr)) {
      hc_pre(exec, hp, X.ptr, mix.ptr, n, pre.ptr, post.ptr, comb.ptr, u.ptr, rss.ptr);
      if (want_q) {
        rms_norm_quant(exec, u.ptr, n, d, norm, eps, xn.ptr, true, true, xnq.ptr);
      } else {
        rms_norm(exec, u.ptr, n, d, norm, eps, xn.ptr, official, official);
      }
    }
    if (half == 0) {
      const HcPostArgs ha{X.ptr, post.ptr, comb.ptr, X2.ptr, hp.hc, d, official};
      if (!attention_sublayer(layer, rows, segs, entries, ha)) {  // else wo_b's launch did it
        if (official && !B.wo_b.quantized()) round_bf16(exec, y.ptr, n * d);  // else rounded
        hc_post(exec, hp, X.ptr, post.ptr, comb.ptr, y.ptr, n, X2.ptr, official);
      }
    } else {
      // The routed experts' weighted sum joins y in hc_post's launch.
      moe_sublayer(layer, rows);
      moe_combine_hc_post(exec, rout.ptr, wts.ptr, c.experts_per_token, official, official, y.ptr,
                          hp, X.ptr, post.ptr, comb.ptr, n, X2.ptr, official);
    }
    std::swap(X.ptr, X2.ptr);
  }
}

bool CudaModel::Impl::attention_sublayer(int layer, const Rows& rows, const Segments& segs,
                                         const int32_t* entries, const HcPostArgs& hc_post_args) {
  const model::ModelConfig& c = cfg;
  const DevBlock& B = blocks[static_cast<size_t>(layer)];
  LayerState& L = layers[static_cast<size_t>(layer)];
  const int64_t n = rows.n, d = c.hidden_size;
  const int H = c.n_heads, D = c.head_dim, R = c.rope_dim, pairs = R / 2, W = c.sliding_window;
  const int ratio = c.ratio(layer);
  const int64_t qlr = c.q_lora_rank;
  const float eps = static_cast<float>(c.rms_eps);
  const float* inv = ratio == 0 ? main_inv : comp_inv;
  const float af = ratio == 0 ? main_af : comp_af;
  const bool csa = B.has_indexer;
  const int ihd = c.index_head_dim, ih = c.index_n_heads;

  // The products of xn first: those on the split-row GEMV (few output columns) in one launch,
  // the others a linear() each.
  XnProduct ps[7];
  int np = 0;
  ps[np++] = {&B.wq_a, qa.ptr, qlr};
  ps[np++] = {&B.wkv, kv.ptr, D};
  if (B.has_compressor) {
    ps[np++] = {&B.compressor.wkv, ca.ptr, L.comp.width};
    ps[np++] = {&B.compressor.wgate, cg.ptr, L.comp.width};
  }
  if (B.has_compressor && csa) {
    ps[np++] = {&B.index_compressor.wkv, ica.ptr, L.icomp.width};
    ps[np++] = {&B.index_compressor.wgate, icg.ptr, L.icomp.width};
  }
  if (csa) ps[np++] = {&B.index_weights_proj, iw.ptr, ih};
  GemvJob jobs[kMaxGemvJobs];
  int count = 0;
  const float* group_x = nullptr;
  const bool may_group = !exec.emulate && fast_kernels() && !batch_invariant();
  for (int i = 0; i < np; ++i) {
    const XnProduct& p = ps[i];
    const bool quant = official && p.w->quantized();
    const float* x = quant && p.w->quantize_input ? xn_q : xn.ptr;
    if (may_group && x && count < kMaxGemvJobs && (count == 0 || x == group_x) &&
        gemv_split_row(*p.w, n, x, d)) {
      jobs[count++] = {p.w, nullptr, p.y, p.ldy, quant};
      group_x = x;
    } else {
      linear(exec, xn.ptr, d, n, *p.w, p.y, p.ldy, official, xq.ptr, xn_q);
    }
  }
  if (count > 0) gemv_split_row_group(exec, group_x, d, n, jobs, count);

  // qr quantized for wq_b's GEMV pass in the norm's launch (where linear() would quantize it);
  // the indexer's q product takes the same copy (the same rows, the same 1×128 blocks).
  const bool q_fused = official && B.wq_b.quantized() && B.wq_b.quantize_input && !exec.emulate &&
                       fast_kernels() && n <= gemv_max_rows() && !batch_invariant();
  const bool iq_ready = q_fused && csa && B.index_wq_b.quantized() && B.index_wq_b.quantize_input;
  if (q_fused) {
    rms_norm_quant(exec, qa.ptr, n, qlr, B.q_norm, eps, qr.ptr, false, true, xq.ptr);
  } else {
    rms_norm(exec, qa.ptr, n, qlr, B.q_norm, eps, qr.ptr, false, official);
  }
  // The kv norm, the compressors and the indexer read only the xn products and qr: on the side
  // stream beside wq_b and the q head norm where nothing of theirs writes what the other reads
  // (xq is only read once quantized), joined before attention.
  const bool side = side_stream && q_fused && (!csa || iq_ready) && attention_overlap();
  Exec sx = exec;
  if (side) {
    sx.stream = side_stream;
    exec.note(cudaEventRecord(fork_event, exec.stream));
    exec.note(cudaStreamWaitEvent(side_stream, fork_event, 0));
  }
  Exec& ax = side ? sx : exec;
  // The CSA layer's indexer chain (index wq_b → indexer top-k) on a third stream beside the kv
  // norm and the compressors, waiting only for the index compressor (its keys): the side chain
  // was the layer's longest. Elsewhere (or DEEPINFER_CUDA_INDEX_STREAM=0) on ax after them.
  const bool index_apart = side && csa && B.has_compressor && index_stream && index_stream_on();
  Exec own_ix = ax;
  if (index_apart) {
    own_ix.stream = index_stream;
    exec.note(cudaStreamWaitEvent(index_stream, fork_event, 0));
  }
  Exec& ix = index_apart ? own_ix : ax;
  const int ipairs = std::min(R, std::max(ihd, 0)) / 2;
  const size_t ri =
      static_cast<size_t>(std::find(ratios.begin(), ratios.end(), ratio) - ratios.begin());
  const int32_t* ent_seq = B.has_compressor ? entries + ent_off[ri] : nullptr;
  const int32_t* ent_j = ent_seq ? ent_seq + (N + opt.max_sequences) : nullptr;
  auto compress = [&](const DevCompressor& w, const CompressorBuffers& cb, const float* a,
                      const float* g, int rp, bool keys) {
    compressor_push(ax, rows, segs, a, g, w.ape, cb);
    compressor_finish(ax, cb, ent_seq, ent_j, entries + ent_count + ri, ent_max, w.norm, eps,
                      comp_inv, comp_af, rp, keys, official);
  };
  if (index_apart) {  // the indexer's keys first, so that its chain waits the least
    compress(B.index_compressor, L.icomp, ica.ptr, icg.ptr, ipairs, true);
    exec.note(cudaEventRecord(index_event, ax.stream));
  }
  if (csa) {
    linear(ix, qr.ptr, qlr, n, B.index_wq_b, iq.ptr, int64_t{ih} * ihd, official, xq.ptr,
           iq_ready ? xq.ptr : nullptr);
    rope(ix, iq.ptr, n, ih, ihd, ipairs, comp_inv, comp_af, rows.pos, false);
    if (official) indexer_rows_official(ix, iq.ptr, n * ih, ihd);
    const float wscale = official ? static_cast<float>(std::pow(ihd, -0.5) * std::pow(ih, -0.5))
                                  : 1.0f / std::sqrt(static_cast<float>(ih));
    if (official) {
      scale_values_bf16(ix, iw.ptr, n * ih, wscale);
    } else {
      scale_values(ix, iw.ptr, n * ih, wscale);
    }
  }
  if (official) {
    kv_norm_rope_official(ax, kv.ptr, n, D, R, B.kv_norm, eps,
                          RopeRows{inv, af, rows.pos, 1, pairs});
  } else {
    rms_norm(ax, kv.ptr, n, D, B.kv_norm, eps, kv.ptr);
    rope(ax, kv.ptr, n, 1, D, pairs, inv, af, rows.pos, false);
  }
  if (B.has_compressor) {
    compress(B.compressor, L.comp, ca.ptr, cg.ptr, pairs, false);
    if (csa && !index_apart) compress(B.index_compressor, L.icomp, ica.ptr, icg.ptr, ipairs, true);
  }
  if (csa) {
    if (index_apart) exec.note(cudaStreamWaitEvent(index_stream, index_event, 0));
    IndexerArgs ia{iq.ptr, iw.ptr, L.icomp.store, L.icomp.capacity, ih,
                   ihd,    ratio,  c.index_topk,  official,         L.icomp.pages};
    indexer_topk(ix, rows, ia, iscore.ptr, sel.ptr, cnt.ptr);
  }
  if (index_apart) {
    exec.note(ix.error);
    exec.note(cudaEventRecord(index_join_event, index_stream));
  }
  // wq_b (after the side stream's work in stream order when there is none: the same bits).
  linear(exec, qr.ptr, qlr, n, B.wq_b, q.ptr, int64_t{H} * D, official, xq.ptr,
         q_fused ? xq.ptr : nullptr);
  if (official) {
    q_head_norm_rope_official(exec, q.ptr, n * H, D, eps, RopeRows{inv, af, rows.pos, H, pairs});
  } else {
    rms_norm(exec, q.ptr, n * H, D, nullptr, eps, q.ptr);
    rope(exec, q.ptr, n, H, D, pairs, inv, af, rows.pos, false);
  }
  if (side) {
    exec.note(sx.error);
    exec.note(cudaEventRecord(join_event, side_stream));
    exec.note(cudaStreamWaitEvent(exec.stream, join_event, 0));
  }
  if (index_apart) exec.note(cudaStreamWaitEvent(exec.stream, index_join_event, 0));
  AttnArgs aa;
  aa.q = q.ptr;
  aa.kv = kv.ptr;
  aa.ring = L.ring.ptr;
  aa.cmp = L.comp.store;
  aa.sel = sel.ptr;
  aa.cnt = cnt.ptr;
  aa.sink = B.attn_sink;
  aa.capacity = L.comp.capacity;
  aa.pages = L.comp.pages;
  aa.H = H;
  aa.D = D;
  aa.W = W;
  aa.ratio = ratio;
  aa.topk = c.index_topk;
  aa.csa = csa;
  aa.official = official;
  aa.scale = 1.0f / std::sqrt(static_cast<float>(D));
  aa.scratch = static_cast<int64_t>(probs.count);
  if (official && D % 2 == 0 && pv_rope()) {  // the decode P·V may rotate its output itself
    aa.out_inv_freq = inv;
    aa.out_factor = af;
    aa.out_pairs = pairs;
  }
  const bool rotated = attention(exec, rows, aa, probs.ptr, o.ptr);
  // The window ring takes this step's kv rows once attention has read the ring: on the side
  // stream beside the output products where the sublayer forked, joined at its end.
  const bool ring_side = side && ring_write_side();
  if (ring_side) {
    exec.note(cudaEventRecord(fork_event, exec.stream));
    exec.note(cudaStreamWaitEvent(side_stream, fork_event, 0));
    ring_write(sx, rows, kv.ptr, L.ring.ptr, W, D);
    exec.note(sx.error);
    exec.note(cudaEventRecord(join_event, side_stream));
  }
  if (!rotated && official && D % 2 == 0) {
    rope_round_bf16(exec, o.ptr, n, H, D, pairs, inv, af, rows.pos, true);
  } else if (!rotated) {
    rope(exec, o.ptr, n, H, D, pairs, inv, af, rows.pos, true);
    if (official) round_bf16(exec, o.ptr, n * H * D);
  }
  const int G = c.o_groups, olr = c.o_lora_rank;
  const int64_t gw = int64_t{H} * D / G;
  // The grouped wo_a (on unless DEEPINFER_CUDA_GROUP_WO_A=0): its G split-row products in one
  // launch.
  DevWeight wg[kMaxGemvJobs];
  bool group = may_group && group_wo_a() && G <= kMaxGemvJobs;
  // wo_b's FP8 input (linear()'s quantization of z) written by the group's launch where it can.
  const bool zq_wanted = official && B.wo_b.quantized() && B.wo_b.quantize_input &&
                         B.wo_b.in == int64_t{G} * olr && fused_wo_b_input();
  bool zq_ready = false;
  for (int g = 0; group && g < G; ++g) {
    wg[g] = B.wo_a.rows(int64_t{g} * olr, olr);
    const float* xg = o.ptr + g * gw;
    const bool quant = official && wg[g].quantized();
    group = !(quant && wg[g].quantize_input) && gemv_split_row(wg[g], n, xg, int64_t{H} * D);
    jobs[g] = {&wg[g],           xg,    z.ptr + int64_t{g} * olr,
               int64_t{G} * olr, quant, zq_wanted ? xq.ptr + int64_t{g} * olr : nullptr};
  }
  if (group) {
    zq_ready = gemv_split_row_group(exec, o.ptr, int64_t{H} * D, n, jobs, G) && zq_wanted;
  } else {
    for (int g = 0; g < G; ++g) {
      linear(exec, o.ptr + g * gw, int64_t{H} * D, n, B.wo_a.rows(int64_t{g} * olr, olr),
             z.ptr + int64_t{g} * olr, int64_t{G} * olr, official, xq.ptr);
    }
  }
  // Quantized weights' products are bf16-rounded already (linear()'s contract): no launch then.
  if (official && !B.wo_a.quantized()) round_bf16(exec, z.ptr, n * G * olr);
  // At one row with z's FP8 copy ready, wo_b's row kernel (where it takes one: gemv.cuh's
  // gemv_mma_min_out) also computes hc_post of its output.
  const bool posted = zq_ready && n == 1 && fused_hc_post() &&
                      gemv_row_hc_post(exec, xq.ptr, B.wo_b, y.ptr, true, hc_post_args);
  if (!posted) {
    linear(exec, z.ptr, int64_t{G} * olr, n, B.wo_b, y.ptr, d, official, xq.ptr,
           zq_ready ? xq.ptr : nullptr);
  }
  if (ring_side) {
    exec.note(cudaStreamWaitEvent(exec.stream, join_event, 0));
  } else {
    ring_write(exec, rows, kv.ptr, L.ring.ptr, W, D);
  }
  return posted;
}

void CudaModel::Impl::moe_sublayer(int layer, const Rows& rows) {
  const model::ModelConfig& c = cfg;
  const DevBlock& B = blocks[static_cast<size_t>(layer)];
  const int64_t n = rows.n, d = c.hidden_size;
  const int E = c.n_routed_experts, K = c.experts_per_token;
  const int64_t inter = c.moe_intermediate, inter_sh = B.ffn.w1.out;
  const float limit = static_cast<float>(c.swiglu_limit);
  // The shared expert reads only xn and writes y, so at GEMV-sized launches (no cuBLAS handle
  // shared between streams) it runs on the side stream beside the gate, the routing and the
  // routed experts, its launch tails overlapping theirs; joined before the sublayer ends.
  const bool side = side_stream && !exec.emulate && n <= gemv_max_rows() && shared_overlap();
  Exec sx = exec;
  if (side) {
    sx.stream = side_stream;
    exec.note(cudaEventRecord(fork_event, exec.stream));
    exec.note(cudaStreamWaitEvent(side_stream, fork_event, 0));
  }
  float* sq = side ? shq.ptr : xq.ptr;  // the shared expert's quantization scratch
  // Shared expert over all rows; w1 and w3 as one tensor-core GEMV launch where both take it.
  const bool w13_mma = official && xn_q && !exec.emulate && fast_kernels() && !batch_invariant() &&
                       B.ffn.w1.quantize_input && B.ffn.w3.quantize_input &&
                       gemv_mma_supported(B.ffn.w1, n, xn_q, d) &&
                       gemv_mma_supported(B.ffn.w3, n, xn_q, d);
  if (w13_mma) {
    const MmaGemvJob w13[2] = {{&B.ffn.w1, xn_q, d, sh1.ptr, inter_sh, true},
                               {&B.ffn.w3, xn_q, d, sh3.ptr, inter_sh, true}};
    gemv_mma(sx, w13, 2, n, side ? shared_expert_min_blocks() : 0);
  } else {
    linear(sx, xn.ptr, d, n, B.ffn.w1, sh1.ptr, inter_sh, official, sq, xn_q);
    linear(sx, xn.ptr, d, n, B.ffn.w3, sh3.ptr, inter_sh, official, sq, xn_q);
  }
  // Its SwiGLU writes w2's FP8 input in the same launch where w2 runs as GEMV passes.
  const bool w2_q = official && B.ffn.w2.quantized() && B.ffn.w2.quantize_input &&
                    n <= gemv_max_rows() && !batch_invariant();
  if (w2_q && swiglu_quant(sx, sh1.ptr, sh3.ptr, n, inter_sh, limit, official, sq)) {
    linear(sx, sh1.ptr, inter_sh, n, B.ffn.w2, y.ptr, d, official, sq, sq);
  } else {
    swiglu(sx, sh1.ptr, sh3.ptr, n, inter_sh, limit, nullptr, official);
    linear(sx, sh1.ptr, inter_sh, n, B.ffn.w2, y.ptr, d, official, sq);
  }
  const auto join = [&] {
    exec.note(sx.error);  // sx is a copy of exec, on either stream
    if (!side) return;
    exec.note(cudaEventRecord(join_event, side_stream));
    exec.note(cudaStreamWaitEvent(exec.stream, join_event, 0));
  };
  linear(exec, xn.ptr, d, n, B.gate, mlog.ptr, E, official, xq.ptr, xn_q);
  RouteArgs ra;
  ra.E = E;
  ra.K = K;
  ra.scoring = c.scoring_func == "sigmoid"   ? Scoring::Sigmoid
               : c.scoring_func == "softmax" ? Scoring::Softmax
                                             : Scoring::SqrtSoftplus;
  ra.hash = c.hash_routed[static_cast<size_t>(layer)];
  ra.tid2eid = B.tid2eid;
  ra.bias = B.gate_bias;
  ra.routed_scale = static_cast<float>(c.routed_scaling);
  moe_route(exec, ra, rows.ids, n, mlog.ptr, idx.ptr, wts.ptr);
  // Routed experts, one slot per (row, k): grouped by expert on the device (each expert's
  // weights streamed once per step), or the reference path (a product per slot).
  const int64_t slots = n * K;
  const bool qx = official && B.ffn.routed_quantized;
  RoutedExperts re;
  re.r1 = B.ffn.r1, re.r2 = B.ffn.r2, re.r3 = B.ffn.r3;
  re.f1 = B.ffn.f1, re.f2 = B.ffn.f2, re.f3 = B.ffn.f3;
  re.quantized = B.ffn.routed_quantized;
  re.h1 = B.ffn.uniform1 ? &B.ffn.e1 : nullptr;
  re.h2 = B.ffn.uniform2 ? &B.ffn.e2 : nullptr;
  re.h3 = B.ffn.uniform3 ? &B.ffn.e3 : nullptr;
  if (!exec.emulate && routed_grouped_supported(re, d, inter)) {
    routed_grouped(exec, expert_plan.plan(), re, xn.ptr, n, E, K, d, inter, limit, wts.ptr,
                   official, rh1.ptr, rh3.ptr, rout.ptr, xq.ptr, idx.ptr, xn_q);
    join();
    return;  // rout joins y in moe_combine_hc_post
  }
  linear_experts(exec, xn.ptr, false, slots, K, B.ffn.r1, idx.ptr, rh1.ptr, inter, inter, d,
                 official, qx, B.ffn.f1, xq.ptr);
  linear_experts(exec, xn.ptr, false, slots, K, B.ffn.r3, idx.ptr, rh3.ptr, inter, inter, d,
                 official, qx, B.ffn.f3, xq.ptr);
  swiglu(exec, rh1.ptr, rh3.ptr, slots, inter, limit, official ? wts.ptr : nullptr, official);
  linear_experts(exec, rh1.ptr, true, slots, K, B.ffn.r2, idx.ptr, rout.ptr, d, d, inter, official,
                 qx, B.ffn.f2, xq.ptr);
  join();
}

}  // namespace deepinfer::cuda
