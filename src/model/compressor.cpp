#include "model/compressor.h"

#include <algorithm>
#include <cmath>

namespace deepinfer::model {

void init_compressor(CompressorState& s, int ratio, int entry_dim, bool overlap) {
  s.ratio = ratio;
  s.overlap = overlap;
  s.width = (overlap ? 2 : 1) * entry_dim;
  const size_t rows = static_cast<size_t>(overlap ? 2 * ratio : ratio);
  s.kv.assign(rows * static_cast<size_t>(s.width), 0.0f);
  s.score.assign(rows * static_cast<size_t>(s.width), -INFINITY);
}

namespace {

// Softmax-weighted sum over `rows` candidates: values v[i·stride], scores g[i·stride].
inline float pool(const float* v, const float* g, int rows, int64_t stride) {
  float m = -INFINITY;
  for (int i = 0; i < rows; ++i) m = std::max(m, g[i * stride]);
  if (m == -INFINITY) return 0.0f;
  float sum = 0, acc = 0;
  for (int i = 0; i < rows; ++i) {
    const float e = std::exp(g[i * stride] - m);
    sum += e;
    acc += e * v[i * stride];
  }
  return acc / sum;
}

// Pushes position p; returns true (and writes entry [dc]) when p closes a block.
bool push(CompressorState& s, int64_t p, const float* a, const float* g, const float* ape, int dc,
          float* entry) {
  const int r = s.ratio, W = s.width;
  const int slot = static_cast<int>(p % r);
  const int row = s.overlap ? r + slot : slot;
  float* kr = s.kv.data() + static_cast<size_t>(row) * W;
  float* sr = s.score.data() + static_cast<size_t>(row) * W;
  const float* ap = ape + static_cast<size_t>(slot) * W;
  for (int k = 0; k < W; ++k) {
    kr[k] = a[k];
    sr[k] = g[k] + ap[k];
  }
  if ((p + 1) % r != 0) return false;
  if (!s.overlap) {
    for (int k = 0; k < dc; ++k) entry[k] = pool(s.kv.data() + k, s.score.data() + k, r, W);
    return true;
  }
  // Overlap: rows [0, r) first half (previous block), rows [r, 2r) second half (this block).
  for (int k = 0; k < dc; ++k) {
    float m = -INFINITY;
    for (int i = 0; i < r; ++i) m = std::max(m, s.score[static_cast<size_t>(i * W + k)]);
    for (int i = r; i < 2 * r; ++i) m = std::max(m, s.score[static_cast<size_t>(i * W + dc + k)]);
    float sum = 0, acc = 0;
    for (int i = 0; i < r; ++i) {
      const float e = std::exp(s.score[static_cast<size_t>(i * W + k)] - m);
      sum += e;
      acc += e * s.kv[static_cast<size_t>(i * W + k)];
    }
    for (int i = r; i < 2 * r; ++i) {
      const float e = std::exp(s.score[static_cast<size_t>(i * W + dc + k)] - m);
      sum += e;
      acc += e * s.kv[static_cast<size_t>(i * W + dc + k)];
    }
    entry[k] = acc / sum;
  }
  std::copy(s.kv.begin() + static_cast<int64_t>(r) * W, s.kv.end(), s.kv.begin());
  std::copy(s.score.begin() + static_cast<int64_t>(r) * W, s.score.end(), s.score.begin());
  return true;
}

}  // namespace

void run_compressor(const ChunkContext& ctx, const CompressorWeights& w, int layer, bool index_keys,
                    int entry_dim, int rope_pairs, const float* x, size_t ws_slot) {
  const int64_t n = ctx.n, W = w.wkv.out;
  float* a = ctx.ws.get(ws_slot, static_cast<size_t>(n * W));
  float* g = ctx.ws.get(ws_slot + 1, static_cast<size_t>(n * W));
  float* cs = ctx.ws.get(ws_slot + 2, static_cast<size_t>(2 * rope_pairs + entry_dim));
  linear_all(ctx, x, w.wkv, a);
  linear_all(ctx, x, w.wgate, g);
  float* entry = cs + 2 * rope_pairs;
  const float eps = static_cast<float>(ctx.config.rms_eps);
  for (size_t si = 0; si < ctx.segs.size(); ++si) {
    const Segment& seg = ctx.segs[si];
    BlockState& st = ctx.block_state(si, layer);
    CompressorState& s = index_keys ? st.index_compressor : st.compressor;
    EntryStore& entries = index_keys ? st.index_keys : st.compressed;
    for (int64_t t = seg.row0; t < seg.row0 + seg.n; ++t) {
      const int64_t p = seg.pos0 + (t - seg.row0);
      if (!push(s, p, a + t * W, g + t * W, w.ape.data(), entry_dim, entry)) continue;
      round_activation(ctx.hooks, entry, entry_dim);  // official: norm(kv.to(bf16)), bf16 out
      rms_norm_rows(entry, 1, entry_dim, w.norm.data(), eps, entry);
      round_activation(ctx.hooks, entry, entry_dim);
      const int64_t j = p / s.ratio;
      rope_cos_sin(ctx.compress_rope, j * s.ratio, rope_pairs, cs, cs + rope_pairs);
      rope_rotate(entry + entry_dim - 2 * rope_pairs, rope_pairs, cs, cs + rope_pairs, false);
      if (!index_keys && ctx.hooks.kv_rows) ctx.hooks.kv_rows(entry, 1, entry_dim, 2 * rope_pairs);
      if (index_keys && ctx.hooks.indexer_rows) ctx.hooks.indexer_rows(entry, 1, entry_dim);
      entries.append(entry);
    }
  }
}

}  // namespace deepinfer::model
