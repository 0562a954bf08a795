// Attention sublayer of a V4 block (spec §6.3–6.7): low-rank Q with per-head norm, the shared
// K=V latent with partial RoPE, sliding window (+ HCA entries or CSA entries picked by the
// Lightning Indexer), attention sink, inverse RoPE and the grouped output projection.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>

#include "backend/cpu/simd.h"
#include "model/compressor.h"
#include "model/forward.h"

namespace deepinfer::model {
namespace {

std::atomic<uint64_t> g_attention_calls{0};  // tags the per-thread key lists of one call

enum : size_t {
  kQa = kWsAttn,
  kQr,
  kQ,
  kKv,
  kCs,
  kIdxQ,
  kIdxW,
  kSel,
  kOut,
  kGrp,
  kZ,
  kZg,
  kCmp = kWsAttn + 14,
  kIdxCmp = kWsAttn + 18,
};

// Lightning Indexer picks for each chunk token (spec §6.5): sel[t·topk …] holds cnt[t] entry ids,
// the top min(topk, visible) by score, lower id first among equal scores.
void index_select(const ChunkContext& ctx, int layer, const BlockWeights& w, const float* x,
                  const float* qr, int32_t* sel, int32_t* cnt) {
  const ModelConfig& c = ctx.config;
  const int64_t n = ctx.n;
  const int ih = c.index_n_heads, ihd = c.index_head_dim, topk = c.index_topk;
  const int pairs = std::min(c.rope_dim, ihd) / 2;
  float* q = ctx.ws.get(kIdxQ, static_cast<size_t>(n * ih * ihd));
  float* wt = ctx.ws.get(kIdxW, static_cast<size_t>(n * ih));
  linear_all(ctx, qr, w.indexer.wq_b, q);
  linear_all(ctx, x, w.indexer.weights_proj, wt);
  float* cs = ctx.ws.get(kCs, static_cast<size_t>(2 * c.rope_dim));
  for (int64_t t = 0; t < n; ++t) {
    rope_cos_sin(ctx.compress_rope, ctx.row_pos[t], pairs, cs, cs + pairs);
    for (int h = 0; h < ih; ++h) {
      rope_rotate(q + (t * ih + h) * ihd + ihd - 2 * pairs, pairs, cs, cs + pairs, false);
    }
  }
  if (ctx.hooks.indexer_rows) ctx.hooks.indexer_rows(q, n * ih, ihd);
  const bool fused = ctx.hooks.index_score != nullptr;  // official: both scales on the weights
  const float wscale = fused ? static_cast<float>(std::pow(ihd, -0.5) * std::pow(ih, -0.5))
                             : 1.0f / std::sqrt(static_cast<float>(ih));
  const float sscale = 1.0f / std::sqrt(static_cast<float>(ihd));
  if (fused) ctx.hooks.index_scores(wt, n * ih);  // weights_proj's bf16 output
  for (int64_t i = 0; i < n * ih; ++i) wt[i] *= wscale;
  if (ctx.hooks.index_scores) ctx.hooks.index_scores(wt, n * ih);
  const int ratio = c.ratio(layer);
  int64_t max_entries = 1;
  for (size_t si = 0; si < ctx.segs.size(); ++si)
    max_entries = std::max(max_entries, ctx.block_state(si, layer).compressed.count);
  const int64_t per_token = max_entries * ih * ihd;
  cpu::parallel_for(
      ctx.pool, n, std::max<int64_t>(1, (int64_t{1} << 16) / per_token),
      [&](int64_t t0, int64_t t1) {
        thread_local std::vector<float> score;
        thread_local std::vector<int32_t> order;
        thread_local std::vector<float> key_buf;
        key_buf.resize(static_cast<size_t>(ihd));
        for (int64_t t = t0; t < t1; ++t) {
          const BlockState& st = ctx.block_state(static_cast<size_t>(ctx.row_seg[t]), layer);
          const int64_t p = ctx.row_pos[t];
          const int64_t vis = std::min<int64_t>((p + 1) / ratio, st.compressed.count);
          score.resize(static_cast<size_t>(vis));
          for (int64_t j = 0; j < vis; ++j) {
            const float* k = st.index_keys.row(j, key_buf.data());
            if (fused) {
              score[static_cast<size_t>(j)] =
                  ctx.hooks.index_score(q + t * ih * ihd, k, wt + t * ih, ih, ihd);
              continue;
            }
            float s = 0;
            for (int h = 0; h < ih; ++h) {
              const float d = cpu::dot(q + (t * ih + h) * ihd, k, ihd);
              s += (d > 0 ? d * sscale : 0.0f) * wt[t * ih + h];
            }
            score[static_cast<size_t>(j)] = s;
          }
          if (ctx.hooks.index_scores && vis) ctx.hooks.index_scores(score.data(), vis);
          const int64_t k = std::min<int64_t>(topk, vis);
          order.resize(static_cast<size_t>(vis));
          std::iota(order.begin(), order.end(), 0);
          auto better = [&](int32_t a, int32_t b) {
            const float sa = score[static_cast<size_t>(a)], sb = score[static_cast<size_t>(b)];
            return sa > sb || (sa == sb && a < b);
          };
          if (k < vis) std::partial_sort(order.begin(), order.begin() + k, order.end(), better);
          std::copy(order.begin(), order.begin() + k, sel + t * topk);
          cnt[t] = static_cast<int32_t>(k);
        }
      });
}

}  // namespace

void attention_sublayer(const ChunkContext& ctx, int layer, const BlockWeights& w, const float* x,
                        float* y) {
  const ModelConfig& c = ctx.config;
  const int64_t n = ctx.n;
  const int H = c.n_heads, D = c.head_dim, R = c.rope_dim, pairs = R / 2, Wn = c.sliding_window;
  const int ratio = c.ratio(layer);
  const float eps = static_cast<float>(c.rms_eps);
  const RopeTable& rope = ratio == 0 ? ctx.main_rope : ctx.compress_rope;

  // Q: low rank, q_norm, per-head unweighted norm, RoPE.
  float* qa = ctx.ws.get(kQa, static_cast<size_t>(n * c.q_lora_rank));
  float* qr = ctx.ws.get(kQr, static_cast<size_t>(n * c.q_lora_rank));
  float* q = ctx.ws.get(kQ, static_cast<size_t>(n * H * D));
  float* kv = ctx.ws.get(kKv, static_cast<size_t>(n * D));
  float* cs = ctx.ws.get(kCs, static_cast<size_t>(2 * R));
  linear_all(ctx, x, w.wq_a, qa);
  rms_norm_rows(qa, n, c.q_lora_rank, w.q_norm.data(), eps, qr);
  round_activation(ctx.hooks, qr, n * c.q_lora_rank);
  linear_all(ctx, qr, w.wq_b, q);
  if (ctx.hooks.q_head_norm) {
    for (int64_t t = 0; t < n; ++t) ctx.hooks.q_head_norm(q + t * H * D, H, D, eps);
  } else {
    rms_norm_rows(q, n * H, D, nullptr, eps, q);
  }
  linear_all(ctx, x, w.wkv, kv);
  rms_norm_rows(kv, n, D, w.kv_norm.data(), eps, kv);
  round_activation(ctx.hooks, kv, n * D);  // official: the norm's bf16 output goes into RoPE
  for (int64_t t = 0; t < n; ++t) {
    rope_cos_sin(rope, ctx.row_pos[t], pairs, cs, cs + pairs);
    for (int h = 0; h < H; ++h)
      rope_rotate(q + (t * H + h) * D + D - R, pairs, cs, cs + pairs, false);
    rope_rotate(kv + t * D + D - R, pairs, cs, cs + pairs, false);
  }
  if (ctx.hooks.kv_rows) ctx.hooks.kv_rows(kv, n, D, R);

  // Compressed entries (all positions of the chunk first: an entry is visible to later queries).
  if (w.has_compressor) {
    run_compressor(ctx, w.compressor, layer, false, D, pairs, x, kCmp);
    if (w.has_indexer) {
      run_compressor(ctx, w.indexer.compressor, layer, true, c.index_head_dim,
                     std::min(R, c.index_head_dim) / 2, x, kIdxCmp);
    }
  }
  int32_t* sel = nullptr;
  int32_t* cnt = nullptr;
  if (w.has_indexer) {
    sel = ctx.ws.get_i32(kSel, static_cast<size_t>(n * c.index_topk));
    cnt = ctx.ws.get_i32(kSel + 1, static_cast<size_t>(n));
    index_select(ctx, layer, w, x, qr, sel, cnt);
  }

  // Attention over window ∪ compressed picks, with the sink as an extra zero-valued logit.
  float* o = ctx.ws.get(kOut, static_cast<size_t>(n * H * D));
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  // ≥ 64K multiply-adds per task (a key list is at most window + topk or all HCA entries).
  int64_t max_entries = 0;
  for (size_t si = 0; si < ctx.segs.size(); ++si)
    max_entries = std::max(max_entries, ctx.block_state(si, layer).compressed.count);
  const int64_t keys_est = Wn + (ratio == 0 ? 0 : w.has_indexer ? c.index_topk : max_entries);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / (2 * keys_est * D));
  // Packed entries are decoded once per (thread, token) and shared by that token's heads.
  const uint64_t call = g_attention_calls.fetch_add(1, std::memory_order_relaxed);
  cpu::parallel_for(ctx.pool, n * H, grain, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<const float*> keys;
    thread_local std::vector<float> s, decoded;
    thread_local uint64_t decoded_call = ~uint64_t{0};
    thread_local int64_t decoded_t = -1, n_window_cached = 0;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / H;
      const int h = static_cast<int>(i % H);
      const Segment& seg = ctx.segs[static_cast<size_t>(ctx.row_seg[t])];
      const BlockState& st = ctx.block_state(static_cast<size_t>(ctx.row_seg[t]), layer);
      const int64_t p = ctx.row_pos[t], pos0 = seg.pos0;
      const float* seg_kv = kv + seg.row0 * D;  // the segment's rows, position pos0 first
      if (keys.empty() || decoded_call != call || decoded_t != t) {
        keys.clear();
        for (int64_t qp = std::max<int64_t>(0, p - Wn + 1); qp <= p; ++qp) {
          keys.push_back(qp >= pos0 ? seg_kv + (qp - pos0) * D : st.ring.data() + (qp % Wn) * D);
        }
        const size_t n_win = keys.size();
        if (ratio > 0) {
          const bool packed = st.compressed.format != EntryFormat::F32;
          const int64_t vis =
              w.has_indexer ? cnt[t] : std::min<int64_t>((p + 1) / ratio, st.compressed.count);
          if (packed) decoded.resize(static_cast<size_t>(std::max<int64_t>(1, vis) * D));
          for (int64_t k = 0; k < vis; ++k) {
            const int64_t j = w.has_indexer ? int64_t{sel[t * c.index_topk + k]} : k;
            keys.push_back(st.compressed.row(j, packed ? decoded.data() + k * D : nullptr));
          }
        }
        n_window_cached = static_cast<int64_t>(n_win);
        decoded_call = call;
        decoded_t = t;
      }
      const int64_t n_window = n_window_cached;
      const float* qh = q + (t * H + h) * D;
      if (ctx.hooks.attend) {  // the reference's window list: min(n, window) slots in a prefill
        const int64_t slots = pos0 == 0 ? std::min<int64_t>(seg.n, Wn) : Wn;
        ctx.hooks.attend(qh, keys.data(), static_cast<int64_t>(keys.size()), n_window, slots,
                         w.attn_sink[static_cast<size_t>(h)], scale, D, o + (t * H + h) * D);
        continue;
      }
      s.resize(keys.size());
      float m = w.attn_sink[static_cast<size_t>(h)];
      for (size_t k = 0; k < keys.size(); ++k) {
        s[k] = cpu::dot(qh, keys[k], D) * scale;
        m = std::max(m, s[k]);
      }
      float sum = std::exp(w.attn_sink[static_cast<size_t>(h)] - m);
      for (size_t k = 0; k < keys.size(); ++k) {
        s[k] = std::exp(s[k] - m);
        sum += s[k];
      }
      const float inv = 1.0f / sum;
      for (size_t k = 0; k < keys.size(); ++k) s[k] *= inv;
      if (ctx.hooks.attn_probs) ctx.hooks.attn_probs(s.data(), static_cast<int64_t>(s.size()));
      float* oh = o + (t * H + h) * D;
      std::fill(oh, oh + D, 0.0f);
      for (size_t k = 0; k < keys.size(); ++k) cpu::axpy(s[k], keys[k], oh, D);
    }
  });

  // Inverse RoPE on the output, then the grouped output projection.
  for (int64_t t = 0; t < n; ++t) {
    rope_cos_sin(rope, ctx.row_pos[t], pairs, cs, cs + pairs);
    for (int h = 0; h < H; ++h)
      rope_rotate(o + (t * H + h) * D + D - R, pairs, cs, cs + pairs, true);
  }
  round_activation(ctx.hooks, o, n * H * D);
  const int G = c.o_groups, olr = c.o_lora_rank;
  const int64_t gw = int64_t{H} * D / G;
  float* grp = ctx.ws.get(kGrp, static_cast<size_t>(n * gw));
  float* z = ctx.ws.get(kZ, static_cast<size_t>(n * G * olr));
  float* zg = ctx.ws.get(kZg, static_cast<size_t>(n * olr));
  for (int g = 0; g < G; ++g) {
    for (int64_t t = 0; t < n; ++t) std::copy_n(o + t * H * D + g * gw, gw, grp + t * gw);
    linear_all(ctx, grp, w.wo_a.rows(int64_t{g} * olr, olr), zg);
    for (int64_t t = 0; t < n; ++t)
      std::copy_n(zg + t * olr, olr, z + t * G * olr + int64_t{g} * olr);
  }
  round_activation(ctx.hooks, z, n * G * olr);
  linear_all(ctx, z, w.wo_b, y);

  // Each window ring keeps the last `window` kv rows (written after every query of the step).
  for (size_t si = 0; si < ctx.segs.size(); ++si) {
    const Segment& seg = ctx.segs[si];
    BlockState& st = ctx.block_state(si, layer);
    for (int64_t t = std::max<int64_t>(0, seg.n - Wn); t < seg.n; ++t) {
      std::copy_n(kv + (seg.row0 + t) * D, D, st.ring.data() + ((seg.pos0 + t) % Wn) * D);
    }
  }
}

}  // namespace deepinfer::model
