// V4.1 attention (spec §12.2 items 2-6, §12.3): window KV with FP8 QAT, the kv sources'
// compressors (ratio 1: a normed projection; ratio > 1: softmax-gated pooling in fp32, no overlap)
// that publish pre-RoPE latents, index keys derived from those latents, the indexer of the index
// sources with the two-level (candidate block) top-k, and the reference's sparse attention kernel
// (tiles of 64 slots, bf16 probabilities, sink in the denominator).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/fp4.h"
#include "backend/cpu/fp8.h"
#include "backend/cpu/quant_act.h"
#include "backend/cpu/simd.h"
#include "model/official_numerics.h"
#include "model/v41_forward.h"

namespace deepinfer::model::v41 {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// sparse_attn of the reference for one query head over `slots` key pointers (null = an empty
// slot): tiles of 64 slots, running max starting at −1e30, exp summed in fp32 for the
// denominator, probabilities rounded to bf16 for P·V, the sink added at the end, bf16 output.
void attend(const float* q, const float* const* slots, int64_t n_slots, float sink, float scale,
            int dim, float* acc, float* out) {
  constexpr int64_t kTile = 64;
  float logit[kTile];
  const float* keys[kTile];
  for (int i = 0; i < dim; ++i) acc[i] = 0.0f;
  float run_max = -1e30f, denom = 0.0f;
  for (int64_t t0 = 0; t0 < n_slots; t0 += kTile) {
    int m = 0;
    for (int64_t s = t0; s < std::min(n_slots, t0 + kTile); ++s)
      if (slots[s]) keys[m++] = slots[s];
    if (m == 0) continue;
    float tile_max = kNegInf;
    for (int i = 0; i < m; ++i) {
      logit[i] = cpu::dot(q, keys[i], dim) * scale;
      tile_max = std::max(tile_max, logit[i]);
    }
    const float new_max = std::max(run_max, tile_max);
    const float rescale = std::exp(run_max - new_max);
    float psum = 0.0f;
    for (int d = 0; d < dim; ++d) acc[d] *= rescale;
    for (int i = 0; i < m; ++i) {
      const float p = std::exp(logit[i] - new_max);
      psum += p;
      cpu::axpy(cpu::round_bf16(p), keys[i], acc, dim);
    }
    denom = denom * rescale + psum;
    run_max = new_max;
  }
  denom += std::exp(sink - run_max);
  for (int d = 0; d < dim; ++d) out[d] = cpu::round_bf16(acc[d] / denom);
}

// Top-k of scores[0, n) by (score desc, index asc), then sorted ascending into picks.
int select_topk(const float* scores, int n, int k, int32_t* picks, std::vector<int32_t>& order) {
  k = std::min(k, n);
  if (k <= 0) return 0;
  order.resize(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) order[static_cast<size_t>(j)] = j;
  auto better = [&](int32_t a, int32_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  };
  std::partial_sort(order.begin(), order.begin() + k, order.end(), better);
  std::copy(order.begin(), order.begin() + k, picks);
  std::sort(picks, picks + k);
  return k;
}

// The kv source's compressor over one segment's chunk (its projections a, g: rows of the step at
// the segment's first row): appends every entry that closes in the chunk (index keys first, from
// the pre-RoPE latent, when the source owns them), then the RoPE'd, FP4-QAT compressed entry.
void run_compressor(V41Chunk& ch, int layer, const V41BlockWeights& w, const V41Segment& sg,
                    V41LayerState& st, const float* a, const float* g) {
  const V41Config& c = ch.c;
  const int r = c.ratio(layer), D = c.head_dim, R = c.rope_dim, Di = c.index_head_dim;
  const bool keys = c.is_index_source(layer);
  float* lat = ch.ws.get(10, static_cast<size_t>(D));
  float* kbuf = ch.ws.get(11, static_cast<size_t>(Di));
  if (st.compressed.dim == 0) init_v41_store(st.compressed, EntryFormat::F32, D, r);
  if (keys && st.index_keys.dim == 0) init_v41_store(st.index_keys, EntryFormat::F32, Di, r);
  if (r > 1 && st.tail_kv.empty()) {
    st.tail_kv.assign(static_cast<size_t>(r * D), 0.0f);
    st.tail_score.assign(static_cast<size_t>(r * D), kNegInf);
  }
  for (int64_t t = 0; t < sg.n; ++t) {
    const int64_t p = sg.pos0 + t;
    if (r == 1) {
      v41_rms_norm(a + t * D, 1, D, w.comp_norm.data(), c.rms_eps, lat);
    } else {
      const int64_t slot = p % r;
      std::memcpy(st.tail_kv.data() + slot * D, a + t * D, sizeof(float) * static_cast<size_t>(D));
      std::memcpy(st.tail_score.data() + slot * D, g + t * D,
                  sizeof(float) * static_cast<size_t>(D));
      if ((p + 1) % r != 0) continue;
      for (int k = 0; k < D; ++k) {
        float mx = kNegInf;
        for (int s = 0; s < r; ++s)
          mx = std::max(mx, st.tail_score[static_cast<size_t>(s * D + k)]);
        float sum = 0.0f;
        for (int s = 0; s < r; ++s)
          sum += std::exp(st.tail_score[static_cast<size_t>(s * D + k)] - mx);
        float pooled = 0.0f;
        for (int s = 0; s < r; ++s) {
          const float sm = std::exp(st.tail_score[static_cast<size_t>(s * D + k)] - mx) / sum;
          pooled += st.tail_kv[static_cast<size_t>(s * D + k)] * sm;
        }
        lat[k] = cpu::round_bf16(pooled);
      }
      v41_rms_norm(lat, 1, D, w.comp_norm.data(), c.rms_eps, lat);
    }
    const int64_t j = p / r;  // entry j, RoPE'd at its first position r·j
    if (keys) {
      v41_linear(ch, lat, 1, w.idx_wk, kbuf, true);
      v41_rms_norm(kbuf, 1, Di, w.idx_k_norm.data(), c.rms_eps, kbuf);
      v41_rope(ch.compress_rope, kbuf, 1, Di, R, r * j, false);
      cpu::fp4_act_quant_inplace(kbuf, Di, 32);
      st.index_keys.append(kbuf);
    }
    v41_rope(ch.compress_rope, lat, 1, D, R, r * j, false);
    fp4_e4m3_scaled_inplace(lat, D, 16);
    st.compressed.append(lat);
  }
}

// The indexer of an index source over segment si: picks per query row into ws.topk (stride
// index_topk, rows of the step), and the candidate blocks when this is the candidate source.
// q [seg n, Hi·Di] and wts [seg n, Hi] are the segment's rows of the step's projections.
void run_indexer(V41Chunk& ch, int layer, size_t si, const V41LayerState& key_st, float* q,
                 const float* wts) {
  const V41Config& c = ch.c;
  const V41Segment& sg = ch.segs[si];
  const int r = c.ratio(layer), Hi = c.index_n_heads, Di = c.index_head_dim, R = c.rope_dim;
  const int K = c.index_topk;
  const int64_t n = sg.n;
  const int64_t max_vis = (sg.pos0 + n) / r;
  float* scores = ch.ws.get(14, static_cast<size_t>(std::max<int64_t>(max_vis, 1)));
  // The keys as contiguous floats: owned fp32 rows in place, else decoded once per chunk.
  const EntryStore& ks = key_st.index_keys;
  const float* keys = nullptr;
  if (!ks.paged() && ks.format == EntryFormat::F32) {
    keys = reinterpret_cast<const float*>(ks.own.data());
  } else {
    float* kd = ch.ws.get(16, static_cast<size_t>(std::max<int64_t>(max_vis, 1) * Di));
    for (int64_t j = 0; j < max_vis; ++j) ks.read(j, kd + j * Di);
    keys = kd;
  }
  const bool source = layer == c.candidate_source_layer;
  const bool filtered = c.uses_candidates(layer) && ch.ws.candidate_off.size() == ch.segs.size();
  const int bs = std::max(c.candidate_block_size, 1);
  const int64_t n_blocks = (max_vis + bs - 1) / bs;
  uint8_t* cand = nullptr;
  int64_t stride = 0;
  if (source || filtered) {
    cand = ch.ws.candidates.data() + ch.ws.candidate_off[si];
    stride = ch.ws.candidate_stride[si];
  }
  float* bscore = ch.ws.get(15, static_cast<size_t>(std::max<int64_t>(n_blocks, 1)));
  std::vector<int32_t>& block_picks = ch.ws.block_picks;
  if (block_picks.size() < static_cast<size_t>(std::max<int64_t>(n_blocks, 1)))
    block_picks.resize(static_cast<size_t>(std::max<int64_t>(n_blocks, 1)));
  for (int64_t t = 0; t < n; ++t) {
    const int64_t p = sg.pos0 + t;
    float* qt = q + t * Hi * Di;
    v41_rope(ch.compress_rope, qt, Hi, Di, R, p, false);
    cpu::fp4_act_quant_inplace(qt, static_cast<int64_t>(Hi) * Di, 32);
    const int nvis = static_cast<int>((p + 1) / r);
    for (int j = 0; j < nvis; ++j)
      scores[j] =
          official::index_score(qt, keys + static_cast<int64_t>(j) * Di, wts + t * Hi, Hi, Di);
    if (source && nvis > 0) {
      const int nb = (nvis + bs - 1) / bs;
      for (int b = 0; b < nb; ++b) {
        float m = kNegInf;
        for (int j = b * bs; j < std::min(nvis, (b + 1) * bs); ++j) m = std::max(m, scores[j]);
        bscore[b] = m;
      }
      bscore[(nvis - 1) / bs] = std::numeric_limits<float>::infinity();
      int32_t* picks = block_picks.data();
      const int kb = select_topk(bscore, nb, c.candidate_topk_blocks, picks, ch.ws.order);
      for (int i = 0; i < kb; ++i)
        if (bscore[picks[i]] > kNegInf) cand[t * stride + picks[i]] = 1;
    }
    if (filtered) {
      for (int j = 0; j < nvis; ++j)
        if (!cand[t * stride + j / bs]) scores[j] = kNegInf;
    }
    select_topk(scores, nvis, K, ch.ws.topk.data() + (sg.row0 + t) * K, ch.ws.order);
  }
}

}  // namespace

void fp4_e4m3_scaled_inplace(float* x, int64_t n, int block) {
  const float floor = 6.0f * 0x1p-9f;
  for (int64_t b0 = 0; b0 < n; b0 += block) {
    float* v = x + b0;
    const int len = static_cast<int>(std::min<int64_t>(block, n - b0));
    float amax = 0.0f;
    for (int i = 0; i < len; ++i) amax = std::max(amax, std::fabs(v[i]));
    amax = std::max(amax, floor);
    const float s = cpu::round_fp8_e4m3(std::min(amax / 6.0f, cpu::kFp8E4m3Max));
    for (int i = 0; i < len; ++i) {
      const float u = std::clamp(v[i] / s, -6.0f, 6.0f);
      v[i] = cpu::round_bf16(cpu::round_fp4_e2m1(u) * s);
    }
  }
}

void init_v41_store(EntryStore& s, EntryFormat format, int dim, int ratio) {
  s = EntryStore{};
  s.format = format;
  s.dim = dim;
  s.ratio = ratio;
  s.row_bytes = entry_row_bytes(format, dim, 0);
}

void v41_attention(V41Chunk& ch, int layer, const V41BlockWeights& w, const float* x, float* y) {
  const V41Config& c = ch.c;
  const int64_t n = ch.n;
  const int H = c.n_heads, D = c.head_dim, R = c.rope_dim, win = c.sliding_window;
  const int r = c.ratio(layer);
  const RopeTable& rope = r > 0 ? ch.compress_rope : ch.main_rope;
  for (const V41Segment& sg : ch.segs) {
    V41LayerState& ls = sg.state->layers[static_cast<size_t>(layer)];
    if (ls.ring.empty()) ls.ring.assign(static_cast<size_t>(win * D), 0.0f);
  }

  float* qr = ch.ws.get(17, static_cast<size_t>(n * c.q_lora_rank));
  float* q = ch.ws.get(18, static_cast<size_t>(n * H * D));
  float* kv = ch.ws.get(19, static_cast<size_t>(n * D));
  v41_linear_rows(ch, x, ch.seg_rows, w.wq_a, qr, true);
  v41_rms_norm(qr, n, c.q_lora_rank, w.q_norm.data(), c.rms_eps, qr);
  v41_linear_rows(ch, qr, ch.seg_rows, w.wq_b, q, true);
  v41_linear_rows(ch, x, ch.seg_rows, w.wkv, kv, true);
  v41_rms_norm(kv, n, D, w.kv_norm.data(), c.rms_eps, kv);
  for (int64_t t = 0; t < n; ++t) {
    v41_rope(rope, q + t * H * D, H, D, R, ch.row_pos[t], false);
    v41_rope(rope, kv + t * D, 1, D, R, ch.row_pos[t], false);
    cpu::fp8_act_quant_inplace(kv + t * D, D, 32);
  }

  // Compressed entries and the picks of the latest index source.
  if (r > 0) {
    const int ks = c.kv_source_of[static_cast<size_t>(layer)];
    if (ks == layer) {
      float* a = ch.ws.get(8, static_cast<size_t>(n * D));
      float* g = ch.ws.get(9, static_cast<size_t>(n * D));
      v41_linear_rows(ch, x, ch.seg_rows, w.comp_wkv, a, r == 1);
      if (r > 1) v41_linear_rows(ch, x, ch.seg_rows, w.comp_wgate, g, false);
      for (const V41Segment& sg : ch.segs)
        run_compressor(ch, layer, w, sg, sg.state->layers[static_cast<size_t>(layer)],
                       a + sg.row0 * D, g + sg.row0 * D);
    }
    if (c.is_index_source(layer)) {
      const int key = c.index_key_source_of[static_cast<size_t>(layer)];
      const int Hi = c.index_n_heads, Di = c.index_head_dim, K = c.index_topk;
      float* iq = ch.ws.get(12, static_cast<size_t>(n * Hi * Di));
      float* wts = ch.ws.get(13, static_cast<size_t>(n * Hi));
      v41_linear_rows(ch, qr, ch.seg_rows, w.idx_wq_b, iq, true);
      v41_linear_rows(ch, x, ch.seg_rows, w.idx_weights_proj, wts, true);
      const float wscale = static_cast<float>(std::pow(static_cast<double>(Di), -0.5) *
                                              std::pow(static_cast<double>(Hi), -0.5));
      for (int64_t i = 0; i < n * Hi; ++i) wts[i] = cpu::round_bf16(wts[i] * wscale);
      ch.ws.topk.assign(static_cast<size_t>(n * K), -1);
      if (layer == c.candidate_source_layer) {  // per segment: [seg n, its block count]
        const int bs = std::max(c.candidate_block_size, 1);
        ch.ws.candidate_off.clear();
        ch.ws.candidate_stride.clear();
        int64_t total = 0;
        for (const V41Segment& sg : ch.segs) {
          const int64_t n_blocks = ((sg.pos0 + sg.n) / r + bs - 1) / bs;
          ch.ws.candidate_off.push_back(total);
          ch.ws.candidate_stride.push_back(std::max<int64_t>(n_blocks, 1));
          total += sg.n * ch.ws.candidate_stride.back();
        }
        ch.ws.candidates.assign(static_cast<size_t>(total), 0);
      }
      for (size_t si = 0; si < ch.segs.size(); ++si) {
        const V41Segment& sg = ch.segs[si];
        run_indexer(ch, layer, si, sg.state->layers[static_cast<size_t>(key)],
                    iq + sg.row0 * Hi * Di, wts + sg.row0 * Hi);
      }
    }
  }

  const int K = r > 0 ? c.index_topk : 0;
  float* o = ch.ws.get(20, static_cast<size_t>(n * H * D));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  const int ks = r > 0 ? c.kv_source_of[static_cast<size_t>(layer)] : -1;
  cpu::parallel_for(ch.pool, n, 1, [&](int64_t t0, int64_t t1) {
    thread_local std::vector<const float*> slots;
    thread_local std::vector<float> acc, picked;  // picked: decoded packed entries [K, D]
    acc.resize(static_cast<size_t>(D));
    for (int64_t t = t0; t < t1; ++t) {
      const V41Segment& sg = ch.segs[static_cast<size_t>(ch.row_seg[t])];
      const V41LayerState& ls = sg.state->layers[static_cast<size_t>(layer)];
      const V41LayerState* src = ks >= 0 ? &sg.state->layers[static_cast<size_t>(ks)] : nullptr;
      const int64_t W0 = sg.pos0 == 0 ? std::min<int64_t>(sg.n, win) : win;
      const int64_t n_slots = W0 + K;
      const float* kv0 = kv + sg.row0 * D;  // the segment's window rows
      slots.resize(static_cast<size_t>(n_slots));
      if (src && src->compressed.format != EntryFormat::F32)
        picked.resize(static_cast<size_t>(K) * static_cast<size_t>(D));
      const int64_t p = ch.row_pos[t];
      const int64_t first = std::max<int64_t>(0, p - win + 1), count = p - first + 1;
      std::fill(slots.begin(), slots.end(), nullptr);
      const int64_t base = sg.pos0 == 0 ? 0 : W0 - count;  // decode lists the empty slots first
      for (int64_t i = 0; i < count; ++i) {
        const int64_t qpos = first + i;
        slots[static_cast<size_t>(base + i)] =
            qpos >= sg.pos0 ? kv0 + (qpos - sg.pos0) * D : ls.ring.data() + (qpos % win) * D;
      }
      if (r > 0) {
        const int32_t* picks = ch.ws.topk.data() + t * K;
        for (int i = 0; i < K; ++i)
          if (picks[i] >= 0)
            slots[static_cast<size_t>(W0 + i)] =
                src->compressed.row(picks[i], picked.data() + static_cast<int64_t>(i) * D);
      }
      for (int h = 0; h < H; ++h)
        attend(q + (t * H + h) * D, slots.data(), n_slots, w.attn_sink[static_cast<size_t>(h)],
               scale, D, acc.data(), o + (t * H + h) * D);
    }
  });
  // The ring keeps the last `win` rows, written after every query of the chunk has attended.
  for (const V41Segment& sg : ch.segs) {
    V41LayerState& ls = sg.state->layers[static_cast<size_t>(layer)];
    for (int64_t t = std::max<int64_t>(0, sg.n - win); t < sg.n; ++t)
      std::memcpy(ls.ring.data() + ((sg.pos0 + t) % win) * D, kv + (sg.row0 + t) * D,
                  sizeof(float) * static_cast<size_t>(D));
  }

  // Output: inverse RoPE, grouped wo_a (bf16 einsum; each weight row read once for all rows of
  // the step, the same dot per row), wo_b.
  const int G = c.o_groups, gin = H * D / G, orank = c.o_lora_rank;
  float* z = ch.ws.get(21, static_cast<size_t>(n * G * orank));
  for (int64_t t = 0; t < n; ++t) v41_rope(rope, o + t * H * D, H, D, R, ch.row_pos[t], true);
  cpu::parallel_for(ch.pool, static_cast<int64_t>(G) * orank, 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t g = i / orank, k = i % orank;
      const float* wr = w.wo_a.data() + i * gin;
      for (int64_t t = 0; t < n; ++t)
        z[(t * G + g) * orank + k] = cpu::round_bf16(cpu::dot(o + t * H * D + g * gin, wr, gin));
    }
  });
  v41_linear_rows(ch, z, ch.seg_rows, w.wo_b, y, true);
}

}  // namespace deepinfer::model::v41
