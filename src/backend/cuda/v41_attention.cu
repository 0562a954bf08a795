// The V4.1 attention sublayer on the device, step for step as src/model/v41_attention.cpp: window
// KV with FP8 QAT, the kv sources' compressors (ratio 1: a normed projection; ratio 2: softmax-
// gated pooling in fp32, no overlap) publishing index keys and FP4-QAT entries, the indexer with
// the candidate-block pre-filter and top-k (lower index on ties), and the reference's sparse
// attention (tiles of 64 slots, bf16 probabilities, the sink in the denominator).
#include <cmath>

#include "backend/cuda/v41_device.cuh"

namespace deepinfer::cuda {

using namespace v41;

namespace {

// The top min(k, n) of s[0, n) by rank, sorted ascending into picks; returns how many.
DI_HD inline int top_sorted(const float* s, int n, int k, int32_t* picks) {
  if (k >= n) {  // every entry: already in index order
    for (int32_t j = 0; j < n; ++j) picks[j] = j;
    return n > 0 ? n : 0;
  }
  int32_t prev = -1;
  for (int i = 0; i < k; ++i) {  // the next best is the best ranked after the previous pick
    int32_t best = -1;
    for (int32_t j = 0; j < n; ++j) {
      if (prev >= 0 && !ranks_before(s, prev, j)) continue;
      if (best < 0 || ranks_before(s, j, best)) best = j;
    }
    picks[i] = best;
    prev = best;
  }
  for (int i = 1; i < k; ++i) {  // insertion sort by index
    const int32_t v = picks[i];
    int m = i - 1;
    while (m >= 0 && picks[m] > v) {
      picks[m + 1] = picks[m];
      --m;
    }
    picks[m + 1] = v;
  }
  return k;
}

// What attention reads for a row: the step's window rows, the layer's ring, the kv source's
// compressed entries and the row's picks.
struct AttnSlots {
  Rows rw;
  const float *kv = nullptr, *ring = nullptr, *ents = nullptr;
  const int32_t* topk = nullptr;
  int win = 0, K = 0, D = 0;
  int64_t max_entries = 0;
};

// A row's slot list as the CPU builds it: W0 window slots (a fresh prefill lists only its own
// rows; later chunks and decode list the empty slots first), then K compressed picks.
struct RowSlots {
  int64_t W0, first, count, base, n_slots, slot, pos0, row0;
};

DI_HD inline RowSlots row_slots(const AttnSlots& a, int64_t t) {
  RowSlots r;
  const int64_t p = a.rw.pos[t], len = a.rw.len[t];
  r.pos0 = a.rw.pos0[t], r.row0 = a.rw.start[t], r.slot = a.rw.seq[t];
  r.W0 = r.pos0 == 0 ? (len < a.win ? len : a.win) : a.win;
  r.first = p - a.win + 1 > 0 ? p - a.win + 1 : 0;
  r.count = p - r.first + 1;
  r.base = r.pos0 == 0 ? 0 : r.W0 - r.count;
  r.n_slots = r.W0 + a.K;
  return r;
}

// The key of slot s of row t, or null for an empty slot.
DI_HD inline const float* slot_key(const AttnSlots& a, const RowSlots& r, int64_t t, int64_t s) {
  if (s < r.W0) {
    const int64_t wi = s - r.base;
    if (wi < 0 || wi >= r.count) return nullptr;
    const int64_t qp = r.first + wi;
    return qp >= r.pos0 ? a.kv + (r.row0 + qp - r.pos0) * a.D
                        : a.ring + (r.slot * a.win + qp % a.win) * a.D;
  }
  const int32_t pk = a.topk[t * a.K + (s - r.W0)];
  return pk >= 0 ? a.ents + (r.slot * a.max_entries + pk) * a.D : nullptr;
}

// Row en of rows [ne, width] into entry ej[en] of slot eslot[en] of a [slots, max_entries, width]
// store (the compressed entries and index keys alike).
void store_entries(Exec& e, const float* rows, int64_t ne, int64_t width, const int32_t* eslot,
                   const int32_t* ej, int64_t max_entries, float* store) {
  e.each(ne * width, [=] DI_HD(int64_t i) {
    const int64_t en = i / width, k = i % width;
    store[(int64_t{eslot[en]} * max_entries + ej[en]) * width + k] = rows[i];
  });
}

}  // namespace

void CudaV41Model::Impl::compressor(int layer, const V41Step& st, const float* x,
                                    const float* /*qr*/) {
  Exec& e = exec;
  const model::v41::V41Config& c = cfg;
  const V41DevBlock& w = blocks[static_cast<size_t>(layer)];
  V41DevLayer& L = layers[static_cast<size_t>(layer)];
  const int r = c.ratio(layer), D = c.head_dim, R = c.rope_dim, Di = c.index_head_dim;
  const int64_t n = st.n, d = c.hidden_size, ne = st.n_ent[r], maxE = L.max_entries;
  float* a = ca.ptr;
  float* g = cg.ptr;
  linear32(e, x, d, n, w.comp_wkv, a, D, r == 1, xq.ptr);
  if (r > 1) linear32(e, x, d, n, w.comp_wgate, g, D, false, xq.ptr);
  const int32_t* erow = st.ent[r];
  const int32_t* eslot = erow + ne;
  const int32_t* ej = eslot + ne;
  const int32_t* epos = ej + ne;
  float* lt = lat.ptr;
  const Rows rw = st.rows;
  float* tkv = L.tail_kv.ptr;
  float* tsc = L.tail_score.ptr;
  if (ne > 0) {
    e.each(ne * D, [=] DI_HD(int64_t i) {
      const int64_t en = i / D, k = i % D;
      const int32_t row = erow[en];
      if (r == 1) {
        lt[i] = a[int64_t{row} * D + k];
        return;
      }
      const int64_t j = ej[en], pos0 = rw.pos0[row], row0 = rw.start[row], slot = rw.seq[row];
      auto src = [&](const float* chunk, const float* tail, int s) {
        const int64_t q = r * j + s;
        return q >= pos0 ? chunk[(row0 + q - pos0) * D + k] : tail[(slot * r + q % r) * D + k];
      };
      float mx = -INFINITY;
      for (int s = 0; s < r; ++s) mx = fmaxf(mx, src(g, tsc, s));
      float sum = 0.0f;
      for (int s = 0; s < r; ++s) sum += expf(src(g, tsc, s) - mx);
      float pooled = 0.0f;
      for (int s = 0; s < r; ++s) pooled += src(a, tkv, s) * (expf(src(g, tsc, s) - mx) / sum);
      lt[i] = bf16r(pooled);
    });
  }
  if (r > 1) {  // the tails keep each residue's latest position, after the entries read them
    e.each(n * D, [=] DI_HD(int64_t i) {
      const int64_t t = i / D, k = i % D;
      if (t - rw.start[t] < rw.len[t] - r) return;
      const int64_t at = (int64_t{rw.seq[t]} * r + rw.pos[t] % r) * D + k;
      tkv[at] = a[i];
      tsc[at] = g[i];
    });
  }
  if (ne == 0) return;
  rms_norm_bf16(e, lt, ne, D, w.comp_norm, static_cast<float>(c.rms_eps), lt);
  if (c.is_index_source(layer)) {
    float* kb = kbuf.ptr;
    linear32(e, lt, D, ne, w.idx_wk, kb, Di, true, xq.ptr);
    rms_norm_bf16(e, kb, ne, Di, w.idx_k_norm, static_cast<float>(c.rms_eps), kb);
    rope_rows(e, kb, ne, 1, Di, R, comp_cos, comp_sin, epos, false);
    fp4_quant_pow2(e, kb, ne, Di, 32);
    store_entries(e, kb, ne, Di, eslot, ej, maxE, L.keys.ptr);
  }
  rope_rows(e, lt, ne, 1, D, R, comp_cos, comp_sin, epos, false);
  fp4_quant_e4m3(e, lt, ne, D, 16);
  store_entries(e, lt, ne, D, eslot, ej, maxE, L.entries.ptr);
}

void CudaV41Model::Impl::indexer(int layer, const V41Step& st, const float* x, const float* qrv) {
  Exec& e = exec;
  const model::v41::V41Config& c = cfg;
  const V41DevBlock& w = blocks[static_cast<size_t>(layer)];
  const int r = c.ratio(layer), Hi = c.index_n_heads, Di = c.index_head_dim, R = c.rope_dim;
  const int K = c.index_topk;
  const int64_t n = st.n, d = c.hidden_size, S = st.max_visible;
  float* qi = iq.ptr;
  float* wt = wts.ptr;
  linear32(e, qrv, c.q_lora_rank, n, w.idx_wq_b, qi, int64_t{Hi} * Di, true, xq.ptr);
  linear32(e, x, d, n, w.idx_weights_proj, wt, Hi, true, xq.ptr);
  const float wscale = static_cast<float>(std::pow(static_cast<double>(Di), -0.5) *
                                          std::pow(static_cast<double>(Hi), -0.5));
  e.each(n * Hi, [=] DI_HD(int64_t i) { wt[i] = bf16r(wt[i] * wscale); });
  const Rows rw = st.rows;
  rope_rows(e, qi, n, Hi, Di, R, comp_cos, comp_sin, rw.pos, false);
  fp4_quant_pow2(e, qi, n, int64_t{Hi} * Di, 32);
  const V41DevLayer& KL =
      layers[static_cast<size_t>(c.index_key_source_of[static_cast<size_t>(layer)])];
  const float* keys = KL.keys.ptr;
  const int64_t maxE = KL.max_entries;
  float* sc = scores.ptr;
  e.each(n * S, [=] DI_HD(int64_t i) {
    const int64_t t = i / S, j = i % S;
    if (j >= (int64_t{rw.pos[t]} + 1) / r) return;
    const float* q = qi + t * Hi * Di;
    const float* k = keys + (int64_t{rw.seq[t]} * maxE + j) * Di;
    float sum = 0.0f;
    for (int h = 0; h < Hi; ++h) {
      float dt = 0.0f;
      for (int m = 0; m < Di; ++m) dt += q[h * Di + m] * k[m];
      dt = bf16r(dt);
      if (dt > 0) sum += bf16r(dt * wt[t * Hi + h]);
    }
    sc[i] = bf16r(sum);
  });
  const int bs = c.candidate_block_size > 1 ? c.candidate_block_size : 1;
  uint8_t* cd = cand.ptr;
  const int64_t cs = cand_stride;
  if (layer == c.candidate_source_layer) {
    float* bsc = bscore.ptr;
    const int ckb = c.candidate_topk_blocks;
    int32_t* picks = bpick.ptr;
    e.each(n, [=] DI_HD(int64_t t) {
      uint8_t* ct = cd + t * cs;
      for (int64_t b = 0; b < cs; ++b) ct[b] = 0;
      const int nvis = static_cast<int>((int64_t{rw.pos[t]} + 1) / r);
      if (nvis == 0) return;
      const int nb = (nvis + bs - 1) / bs;
      float* bt = bsc + t * cs;
      const float* s = sc + t * S;
      for (int b = 0; b < nb; ++b) {
        float m = -INFINITY;
        for (int j = b * bs; j < nvis && j < (b + 1) * bs; ++j) m = fmaxf(m, s[j]);
        bt[b] = m;
      }
      bt[nb - 1] = INFINITY;
      int32_t* pk = picks + t * cs;
      const int kb = top_sorted(bt, nb, ckb, pk);
      for (int i = 0; i < kb; ++i)
        if (bt[pk[i]] > -INFINITY) ct[pk[i]] = 1;
    });
  }
  if (c.uses_candidates(layer) && c.is_index_source(c.candidate_source_layer)) {
    e.each(n * S, [=] DI_HD(int64_t i) {
      const int64_t t = i / S, j = i % S;
      if (j >= (int64_t{rw.pos[t]} + 1) / r) return;
      if (j / bs >= cs || !cd[t * cs + j / bs]) sc[i] = -INFINITY;
    });
  }
  select_topk_by_id(e, rw, sc, S, r, K, pick_flags.ptr, topk.ptr);
}

void CudaV41Model::Impl::attention(int layer, const V41Step& st, const float* x, float* y) {
  Exec& e = exec;
  const model::v41::V41Config& c = cfg;
  const V41DevBlock& w = blocks[static_cast<size_t>(layer)];
  const int H = c.n_heads, D = c.head_dim, R = c.rope_dim, win = c.sliding_window;
  const int r = c.ratio(layer);
  const int64_t n = st.n, d = c.hidden_size;
  const float eps = static_cast<float>(c.rms_eps);
  const float* cs = r > 0 ? comp_cos : main_cos;
  const float* sn = r > 0 ? comp_sin : main_sin;
  const Rows rw = st.rows;
  float* qa = qr.ptr;
  float* qv = q.ptr;
  float* kvv = kv.ptr;
  linear32(e, x, d, n, w.wq_a, qa, c.q_lora_rank, true, xq.ptr);
  rms_norm_bf16(e, qa, n, c.q_lora_rank, w.q_norm, eps, qa);
  linear32(e, qa, c.q_lora_rank, n, w.wq_b, qv, int64_t{H} * D, true, xq.ptr);
  linear32(e, x, d, n, w.wkv, kvv, D, true, xq.ptr);
  rms_norm_bf16(e, kvv, n, D, w.kv_norm, eps, kvv);
  rope_rows(e, qv, n, H, D, R, cs, sn, rw.pos, false);
  rope_rows(e, kvv, n, 1, D, R, cs, sn, rw.pos, false);
  fp8_quant(e, kvv, n, D, 32);
  if (r > 0) {
    if (c.kv_source_of[static_cast<size_t>(layer)] == layer) compressor(layer, st, x, qa);
    if (c.is_index_source(layer)) indexer(layer, st, x, qa);
  }

  const int K = r > 0 ? c.index_topk : 0;
  const int ks = r > 0 ? c.kv_source_of[static_cast<size_t>(layer)] : -1;
  const float* ents = ks >= 0 ? layers[static_cast<size_t>(ks)].entries.ptr : nullptr;
  const int64_t maxE = ks >= 0 ? layers[static_cast<size_t>(ks)].max_entries : 0;
  float* ring = layers[static_cast<size_t>(layer)].ring.ptr;
  const int32_t* tk = topk.ptr;
  const float* sink = w.attn_sink;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  float* ov = o.ptr;
  // Two passes with the operation order of the reference kernel per output element (the CPU's
  // attend()): the logits of every (row, head, slot), then a thread per (row, head, dim) walks the
  // 64-slot tiles with the running max, rescaling its accumulator and the denominator per tile.
  AttnSlots as;
  as.rw = rw, as.kv = kvv, as.ring = ring, as.ents = ents, as.topk = tk;
  as.win = win, as.K = K, as.D = D, as.max_entries = maxE;
  const int64_t NS = int64_t{win} + K;
  float* lg = alog.ptr;
  e.each(n * H * NS, [=] DI_HD(int64_t i) {
    const int64_t t = i / (H * NS), h = (i / NS) % H, s = i % NS;
    const RowSlots rs = row_slots(as, t);
    if (s >= rs.n_slots) return;
    const float* key = slot_key(as, rs, t, s);
    if (!key) return;
    const float* qh = qv + (t * H + h) * D;
    float dt = 0.0f;
    for (int c2 = 0; c2 < D; ++c2) dt += qh[c2] * key[c2];
    lg[i] = dt * scale;
  });
  // Per (row, head): the tiles' running max, the bf16 probabilities (in place of the logits),
  // each tile's rescale (1 for a tile without keys: an exact no-op) and the denominator.
  const int64_t n_tiles = (NS + 63) / 64;
  float* tile_rescale = arsc.ptr;
  float* den = aden.ptr;
  e.each(n * H, [=] DI_HD(int64_t i) {
    const int64_t t = i / H, h = i % H;
    const RowSlots rs = row_slots(as, t);
    float* lt = lg + i * NS;
    float* rsc = tile_rescale + i * n_tiles;
    float run_max = -1e30f, denom = 0.0f;
    for (int64_t t0 = 0; t0 < rs.n_slots; t0 += 64) {
      const int64_t t1 = rs.n_slots < t0 + 64 ? rs.n_slots : t0 + 64;
      rsc[t0 / 64] = 1.0f;
      float tile_max = -INFINITY;
      bool any = false;
      for (int64_t s = t0; s < t1; ++s)
        if (slot_key(as, rs, t, s)) tile_max = fmaxf(tile_max, lt[s]), any = true;
      if (!any) continue;
      const float new_max = fmaxf(run_max, tile_max);
      const float rescale = expf(run_max - new_max);
      float psum = 0.0f;
      for (int64_t s = t0; s < t1; ++s) {
        if (!slot_key(as, rs, t, s)) continue;
        const float pr = expf(lt[s] - new_max);
        psum += pr;
        lt[s] = bf16r(pr);
      }
      rsc[t0 / 64] = rescale;
      denom = denom * rescale + psum;
      run_max = new_max;
    }
    den[i] = denom + expf(sink[h] - run_max);
  });
  // Per (row, head, dim): the accumulator rescaled per tile, then Σ p·v in slot order.
  e.each(n * H * D, [=] DI_HD(int64_t i) {
    const int64_t t = i / (int64_t{H} * D), th = i / D, c2 = i % D;
    const RowSlots rs = row_slots(as, t);
    const float* pt = lg + th * NS;
    const float* rsc = tile_rescale + th * n_tiles;
    float acc = 0.0f;
    for (int64_t t0 = 0; t0 < rs.n_slots; t0 += 64) {
      acc *= rsc[t0 / 64];
      const int64_t t1 = rs.n_slots < t0 + 64 ? rs.n_slots : t0 + 64;
      for (int64_t s = t0; s < t1; ++s)
        if (const float* key = slot_key(as, rs, t, s)) acc += pt[s] * key[c2];
    }
    ov[i] = bf16r(acc / den[th]);
  });
  // The ring keeps each sequence's last `win` rows, written after every query has attended.
  e.each(n * D, [=] DI_HD(int64_t i) {
    const int64_t t = i / D, k = i % D;
    if (t - rw.start[t] < rw.len[t] - win) return;
    ring[(int64_t{rw.seq[t]} * win + rw.pos[t] % win) * D + k] = kvv[i];
  });

  // Output: inverse RoPE, grouped wo_a (bf16 products per group), wo_b.
  rope_rows(e, ov, n, H, D, R, cs, sn, rw.pos, true);
  const int G = c.o_groups, orank = c.o_lora_rank;
  const int64_t gin = int64_t{H} * D / G, zw = int64_t{G} * orank;
  for (int gi = 0; gi < G; ++gi)
    linear32(e, ov + gi * gin, int64_t{H} * D, n, w.wo_a.rows(int64_t{gi} * orank, orank),
             z.ptr + int64_t{gi} * orank, zw, true, xq.ptr);
  linear32(e, z.ptr, zw, n, w.wo_b, y, d, true, xq.ptr);
}

}  // namespace deepinfer::cuda
