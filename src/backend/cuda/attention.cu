// Reference bodies of the compressor, indexer and attention steps (one thread per output element
// or per row), mirroring src/model/compressor.cpp and attention.cpp.
#include "backend/cuda/attention.cuh"
#include "backend/cuda/attention_tc.cuh"
#include "backend/cuda/fast_ops.cuh"
#include "backend/cuda/gemv.cuh"

namespace deepinfer::cuda {

void compressor_push(Exec& e, const Rows& rows, const Segments& segs, const float* a,
                     const float* g, const float* ape, const CompressorBuffers& c) {
  if (!e.emulate && fast_kernels() && compressor_fast()) {
    compressor_push_fast(e, rows, segs, a, g, ape, c);
    return;
  }
  const CompressorBuffers cb = c;
  const Segments sg = segs;
  const int dc = c.dim;
  e.each(segs.n * dc, [=] DI_HD(int64_t i) {
    const int64_t sgi = i / dc;
    const int k = static_cast<int>(i % dc);
    const int r = cb.ratio, W = cb.width;
    const int seq = sg.seq[sgi];
    float* kv = cb.kv + int64_t{seq} * cb.rows * W;
    float* sc = cb.score + int64_t{seq} * cb.rows * W;
    const int64_t row0 = sg.row0[sgi], pos0 = sg.pos0[sgi], len = sg.len[sgi];
    for (int64_t t = 0; t < len; ++t) {
      const int64_t p = pos0 + t, row = row0 + t;
      const int slot = static_cast<int>(p % r);
      const int srow = cb.overlap ? r + slot : slot;
      kv[srow * W + k] = a[row * W + k];
      sc[srow * W + k] = g[row * W + k] + ape[slot * W + k];
      if (cb.overlap) {
        kv[srow * W + dc + k] = a[row * W + dc + k];
        sc[srow * W + dc + k] = g[row * W + dc + k] + ape[slot * W + dc + k];
      }
      if ((p + 1) % r != 0) continue;
      float entry;
      if (!cb.overlap) {
        float m = -INFINITY;
        for (int q = 0; q < r; ++q) m = fmaxf(m, sc[q * W + k]);
        if (m == -INFINITY) {
          entry = 0.0f;
        } else {
          float sum = 0.0f, acc = 0.0f;
          for (int q = 0; q < r; ++q) {
            const float ex = expf(sc[q * W + k] - m);
            sum += ex;
            acc += ex * kv[q * W + k];
          }
          entry = acc / sum;
        }
      } else {
        float m = -INFINITY;
        for (int q = 0; q < r; ++q) m = fmaxf(m, sc[q * W + k]);
        for (int q = r; q < 2 * r; ++q) m = fmaxf(m, sc[q * W + dc + k]);
        float sum = 0.0f, acc = 0.0f;
        for (int q = 0; q < r; ++q) {
          const float ex = expf(sc[q * W + k] - m);
          sum += ex;
          acc += ex * kv[q * W + k];
        }
        for (int q = r; q < 2 * r; ++q) {
          const float ex = expf(sc[q * W + dc + k] - m);
          sum += ex;
          acc += ex * kv[q * W + dc + k];
        }
        entry = acc / sum;
        for (int q = 0; q < r; ++q) {  // this block becomes the previous one
          kv[q * W + k] = kv[(r + q) * W + k];
          sc[q * W + k] = sc[(r + q) * W + k];
          kv[q * W + dc + k] = kv[(r + q) * W + dc + k];
          sc[q * W + dc + k] = sc[(r + q) * W + dc + k];
        }
      }
      const int64_t j = p / r;
      cb.store[entry_row(cb.pages, seq, j) * dc + k] = entry;
    }
  });
}

void compressor_finish(Exec& e, const CompressorBuffers& c, const int32_t* ent_seq,
                       const int32_t* ent_j, const int32_t* n_ent, int64_t max_ent,
                       const float* norm, float eps, const float* inv_freq, float attention_factor,
                       int pairs, bool index_keys, bool official) {
  if (compressor_finish_fast(e, c, ent_seq, ent_j, n_ent, max_ent, norm, eps, inv_freq,
                             attention_factor, pairs, index_keys, official))
    return;
  const CompressorBuffers cb = c;
  const float hscale = c.dim > 0 ? static_cast<float>(1.0 / sqrt(static_cast<double>(c.dim))) : 1;
  e.each(max_ent, [=] DI_HD(int64_t i) {
    if (i >= *n_ent) return;
    const int dc = cb.dim;
    const int64_t j = ent_j[i];
    float* v = cb.store + entry_row(cb.pages, ent_seq[i], j) * dc;
    if (official) {
      for (int k = 0; k < dc; ++k) v[k] = bf16r(v[k]);
    }
    float ss = 0.0f;
    for (int k = 0; k < dc; ++k) ss += v[k] * v[k];
    const float s = 1.0f / sqrtf(ss / static_cast<float>(dc) + eps);
    for (int k = 0; k < dc; ++k) v[k] = norm[k] * (v[k] * s);
    if (official) {
      for (int k = 0; k < dc; ++k) v[k] = bf16r(v[k]);
    }
    const float p = static_cast<float>(j * cb.ratio);
    for (int q = 0; q < pairs; ++q) {
      const float phi = inv_freq[q] * p;
      const float cs = cosf(phi) * attention_factor, sn = sinf(phi) * attention_factor;
      float* xp = v + dc - 2 * pairs + 2 * q;
      const float x0 = xp[0], x1 = xp[1];
      xp[0] = x0 * cs - x1 * sn;
      xp[1] = x1 * cs + x0 * sn;
    }
    if (!official) return;
    for (int k = 0; k < dc; ++k) v[k] = bf16r(v[k]);
    if (!index_keys) {  // KV QAT: FP8 per 64 on the no-RoPE dims
      const int nope = dc - 2 * pairs;
      for (int b0 = 0; b0 < nope; b0 += 64) {
        const int len = nope - b0 < 64 ? nope - b0 : 64;
        float amax = 0.0f;
        for (int q = 0; q < len; ++q) amax = fmaxf(amax, fabsf(v[b0 + q]));
        const float sc = fp8_act_scale(amax);
        for (int q = 0; q < len; ++q) v[b0 + q] = bf16r(round_e4m3(v[b0 + q] / sc) * sc);
      }
      return;
    }
    // Indexer QAT: Hadamard (exact sums in double), bf16, FP4 per 32.
    double buf[256];
    for (int k = 0; k < dc; ++k) buf[k] = static_cast<double>(v[k]);
    for (int span = 1; span < dc; span *= 2) {
      for (int a = 0; a < dc; a += 2 * span) {
        for (int b = a; b < a + span; ++b) {
          const double x0 = buf[b], x1 = buf[b + span];
          buf[b] = x0 + x1;
          buf[b + span] = x0 - x1;
        }
      }
    }
    for (int k = 0; k < dc; ++k) v[k] = bf16r(static_cast<float>(buf[k]) * hscale);
    const float inv6 = static_cast<float>(1.0 / 6.0);
    const float floor6 = static_cast<float>(6.0 * 0x1p-126);
    for (int b0 = 0; b0 < dc; b0 += 32) {
      const int len = dc - b0 < 32 ? dc - b0 : 32;
      float amax = 0.0f;
      for (int q = 0; q < len; ++q) amax = fmaxf(amax, fabsf(v[b0 + q]));
      const float sc = pow2_at_least(fmaxf(amax, floor6) * inv6);
      for (int q = 0; q < len; ++q) v[b0 + q] = bf16r(round_e2m1(v[b0 + q] / sc) * sc);
    }
  });
}

void compressor_reset(Exec& e, const CompressorBuffers& c, int slot) {
  const int64_t n = int64_t{c.rows} * c.width;
  float* kv = c.kv + slot * n;
  float* sc = c.score + slot * n;
  e.each(n, [=] DI_HD(int64_t i) {
    kv[i] = 0.0f;
    sc[i] = -INFINITY;
  });
}

void indexer_topk(Exec& e, const Rows& rows, const IndexerArgs& a, float* scores, int32_t* sel,
                  int32_t* cnt) {
  if (!e.emulate && fast_kernels() && fast_ops() && indexer_fast_supported(a)) {
    indexer_topk_fast(e, rows, a, scores, sel, cnt);
    return;
  }
  const IndexerArgs ia = a;
  const Rows rw = rows;
  const int64_t cap = a.capacity;
  const float sscale = 1.0f / sqrtf(static_cast<float>(a.dim));
  e.each(rows.n * cap, [=] DI_HD(int64_t i) {
    const int64_t r = i / cap, j = i % cap;
    const int64_t vis = (int64_t{rw.pos[r]} + 1) / ia.ratio;
    if (j >= vis) {
      scores[i] = -INFINITY;
      return;
    }
    const float* k = ia.keys + entry_row(ia.pages, rw.seq[r], j) * ia.dim;
    const float* qr = ia.q + r * ia.heads * ia.dim;
    const float* wr = ia.w + r * ia.heads;
    float s = 0.0f;
    for (int h = 0; h < ia.heads; ++h) {
      float d = 0.0f;
      for (int c = 0; c < ia.dim; ++c) d += qr[h * ia.dim + c] * k[c];
      if (ia.official) {
        d = bf16r(d);
        if (d > 0) s += bf16r(d * wr[h]);
      } else {
        s += (d > 0 ? d * sscale : 0.0f) * wr[h];
      }
    }
    scores[i] = ia.official ? bf16r(s) : s;
  });
  e.each(rows.n * cap, [=] DI_HD(int64_t i) {
    const int64_t r = i / cap, j = i % cap;
    const int64_t vis = (int64_t{rw.pos[r]} + 1) / ia.ratio;
    const int64_t k = vis < ia.topk ? vis : ia.topk;
    if (j == 0) cnt[r] = static_cast<int32_t>(k);
    if (j >= vis) return;
    const float* s = scores + r * cap;
    const float sj = s[j];
    int64_t rank = 0;
    for (int64_t q = 0; q < vis && rank < k; ++q) rank += (s[q] > sj || (s[q] == sj && q < j));
    if (rank < k) sel[r * ia.topk + rank] = static_cast<int32_t>(j);
  });
}

bool attention(Exec& e, const Rows& rows, const AttnArgs& args, float* probs, float* o) {
  if (!e.emulate && fast_kernels() && fast_ops() && attention_tc() &&
      attention_tc_supported(args, rows.n)) {
    return attention_tc_run(e, rows, args, probs, o);
  }
  if (!e.emulate && fast_kernels() && fast_ops()) {
    const SplitKvPlan split = split_kv_plan(rows, args);
    if (split.chunks > 0) {
      attention_split(e, rows, args, split, probs, o);
      return false;
    }
    if (attention_fast_supported(args)) {
      attention_fast(e, rows, args, o);
      return false;
    }
  }
  const AttnArgs a = args;
  const Rows rw = rows;
  const int S = a.W + a.cslots();
  const int H = a.H, D = a.D;
  // Logits (−inf for empty slots); the official kernel reads q as bf16.
  e.each(rows.n * H * S, [=] DI_HD(int64_t i) {
    const int s = static_cast<int>(i % S);
    const int64_t rh = i / S, r = rh / H;
    const float* k = attn_key_at(rw, a, r, s);
    if (!k) {
      probs[i] = -INFINITY;
      return;
    }
    const float* q = a.q + rh * D;
    float d = 0.0f;
    if (a.official) {
      for (int c = 0; c < D; ++c) d += bf16r(q[c]) * k[c];
    } else {
      for (int c = 0; c < D; ++c) d += q[c] * k[c];
    }
    probs[i] = d * a.scale;
  });
  // Softmax with the sink (Exact), or the reference kernel's tiled online softmax (official):
  // tiles of 64 slots of its index list (window rows oldest first, padded to window_slots, then
  // compressed rows), bf16 probabilities for P·V, the sink in the denominator only.
  e.each(rows.n * H, [=] DI_HD(int64_t rh) {
    const int64_t r = rh / H;
    const int h = static_cast<int>(rh % H);
    float* pr = probs + rh * S;
    const float sink = a.sink[h];
    if (!a.official) {
      float m = sink;
      for (int s = 0; s < S; ++s) m = fmaxf(m, pr[s]);
      float sum = expf(sink - m);
      for (int s = 0; s < S; ++s) {
        const float ex = pr[s] == -INFINITY ? 0.0f : expf(pr[s] - m);
        pr[s] = ex;
        sum += ex;
      }
      const float inv = 1.0f / sum;
      for (int s = 0; s < S; ++s) pr[s] *= inv;
      return;
    }
    const OfficialSlots order = official_slots(rw, a, r);
    const int64_t n_slots = order.n_slots;
    auto mine = [&](int64_t t) { return order.slot(t); };
    constexpr int kTile = 64, kMaxTiles = 128;
    float tile_max[kMaxTiles], rescale[kMaxTiles];
    const int n_tiles = static_cast<int>((n_slots + kTile - 1) / kTile);
    float run_max = -INFINITY, denom = 0.0f;
    for (int T = 0; T < n_tiles && T < kMaxTiles; ++T) {
      float tm = -INFINITY;
      bool any = false;
      for (int64_t t = T * kTile; t < n_slots && t < (T + 1) * kTile; ++t) {
        const int s = mine(t);
        if (s < 0) continue;
        any = true;
        tm = fmaxf(tm, pr[s]);
      }
      if (!any) {
        tile_max[T] = run_max;
        rescale[T] = 1.0f;
        continue;
      }
      const float new_max = fmaxf(run_max, tm);
      rescale[T] = expf(run_max - new_max);
      float psum = 0.0f;
      for (int64_t t = T * kTile; t < n_slots && t < (T + 1) * kTile; ++t) {
        const int s = mine(t);
        if (s >= 0) psum += expf(pr[s] - new_max);
      }
      denom = denom * rescale[T] + psum;
      run_max = new_max;
      tile_max[T] = new_max;
    }
    denom += expf(sink - run_max);
    // weight of a key in tile T: bf16(exp(l − max_T)) · Π_{T' > T} rescale_T' / denom
    float later = 1.0f / denom;
    for (int T = n_tiles - 1; T >= 0; --T) {
      for (int64_t t = T * kTile; t < n_slots && t < (T + 1) * kTile; ++t) {
        const int s = mine(t);
        if (s >= 0) pr[s] = bf16r(expf(pr[s] - tile_max[T])) * later;
      }
      later *= rescale[T];
    }
    for (int s = 0; s < S; ++s) {
      if (pr[s] == -INFINITY) pr[s] = 0.0f;
    }
  });
  e.each(rows.n * H * D, [=] DI_HD(int64_t i) {
    const int c = static_cast<int>(i % D);
    const int64_t rh = i / D, r = rh / H;
    const float* pr = probs + rh * S;
    float acc = 0.0f;
    for (int s = 0; s < S; ++s) {
      if (pr[s] == 0.0f) continue;
      const float* k = attn_key_at(rw, a, r, s);
      if (k) acc += pr[s] * k[c];
    }
    o[i] = a.official ? bf16r(acc) : acc;
  });
  return false;
}

void ring_write(Exec& e, const Rows& rows, const float* kv, float* ring, int W, int D) {
  const Rows rw = rows;
  e.each(rows.n * D, [=] DI_HD(int64_t i) {
    const int64_t r = i / D, c = i % D;
    const int64_t t = r - rw.start[r];
    if (t < rw.len[r] - W) return;
    ring[(int64_t{rw.seq[r]} * W + rw.pos[r] % W) * D + c] = kv[i];
  });
}

}  // namespace deepinfer::cuda
