// The attention-side operations of a V4 block on the device (spec §6.3–6.7): the KV compressors
// streaming into per-sequence entry stores, the Lightning Indexer (scores + top-k by rank), and
// attention over window ∪ compressed keys with the sink, in Exact or official numerics.
#pragma once

#include <cstdint>

#include "backend/cuda/kv_pages.cuh"
#include "backend/cuda/ops.cuh"

namespace deepinfer::cuda {

// Segments of a launch: one per sequence, rows [row0, row0 + len) at positions pos0 … .
struct Segments {
  const int32_t* row0 = nullptr;
  const int32_t* seq = nullptr;
  const int32_t* pos0 = nullptr;
  const int32_t* len = nullptr;
  int64_t n = 0;
};

// One compressor's streaming state per sequence slot and its paged output store.
struct CompressorBuffers {
  float* kv = nullptr;     // [slots, rows, width]
  float* score = nullptr;  // [slots, rows, width]
  float* store = nullptr;  // [store rows, dim], rows by entry_row(pages, …)
  int ratio = 0, dim = 0, width = 0, rows = 0;
  bool overlap = false;
  int64_t capacity = 0;  // entries a sequence can reach (max_context / ratio + 1)
  EntryPages pages;
};

// Pushes the chunk rows (a, g: [n, width]) through the state; each entry that closes is written
// raw (pooled, not yet normalised) to its store row (entry_row(pages, seq, j)).
void compressor_push(Exec& e, const Rows& rows, const Segments& segs, const float* a,
                     const float* g, const float* ape, const CompressorBuffers& c);
// The same in parallel over positions (compressor_fast.cu), bit-identical; compressor_push takes
// it on the device unless DEEPINFER_CUDA_FAST_COMPRESSOR=0.
void compressor_push_fast(Exec& e, const Rows& rows, const Segments& segs, const float* a,
                          const float* g, const float* ape, const CompressorBuffers& c);
bool compressor_fast();
void set_compressor_fast(bool on);
// Finishes the entries that closed (ent_seq/ent_j; *n_ent of them, a device count, at most
// max_ent): bf16 (official), RMSNorm with
// `norm`, bf16, RoPE at j·ratio (compress table, last 2·pairs dims), then the kv or indexer QAT.
void compressor_finish(Exec& e, const CompressorBuffers& c, const int32_t* ent_seq,
                       const int32_t* ent_j, const int32_t* n_ent, int64_t max_ent,
                       const float* norm, float eps, const float* inv_freq, float attention_factor,
                       int pairs, bool index_keys, bool official);
// The same with a block per entry (compressor_finish_fast.cu), bit-identical; false where it does
// not apply (emulated, DEEPINFER_CUDA_FAST_COMPRESSOR=0, a width that is not a multiple of 64).
bool compressor_finish_fast(Exec& e, const CompressorBuffers& c, const int32_t* ent_seq,
                            const int32_t* ent_j, const int32_t* n_ent, int64_t max_ent,
                            const float* norm, float eps, const float* inv_freq,
                            float attention_factor, int pairs, bool index_keys, bool official);
// Resets one slot's compressor state (values 0, scores −inf).
void compressor_reset(Exec& e, const CompressorBuffers& c, int slot);

// Lightning Indexer: scores of each row's query heads q [n, ih, ihd] with head weights w [n, ih]
// against the visible index keys of its sequence, then sel[r, 0:cnt[r]) = the top-k entry ids
// (descending score, lower id first among equals).
struct IndexerArgs {
  const float* q = nullptr;
  const float* w = nullptr;
  const float* keys = nullptr;  // [store rows, ihd], rows by entry_row(pages, …)
  int64_t capacity = 0;         // entries a sequence can reach (the scores' row stride)
  int heads = 0, dim = 0, ratio = 0, topk = 0;
  bool official = false;
  EntryPages pages;
};
void indexer_topk(Exec& e, const Rows& rows, const IndexerArgs& a, float* scores, int32_t* sel,
                  int32_t* cnt);

struct AttnArgs {
  const float* q = nullptr;     // [n, H, D]
  const float* kv = nullptr;    // [n, D] this chunk's rows
  const float* ring = nullptr;  // [slots, W, D]
  const float* cmp = nullptr;   // [store rows, D], rows by entry_row(pages, …)
  const int32_t* sel = nullptr;
  const int32_t* cnt = nullptr;
  const float* sink = nullptr;  // [H]
  int64_t capacity = 0;
  int H = 0, D = 0, W = 0, ratio = 0, topk = 0;
  bool csa = false, official = false;
  float scale = 1.0f;
  EntryPages pages;
  int64_t scratch = 0;  // floats in attention()'s probs (0: n · H · (W + cslots()))
  // Official decode: the output's inverse RoPE and bf16 rounding (rope_round_bf16 over its last
  // 2 · out_pairs values, inverse) inside the P·V launch, where attention() says it did them.
  const float* out_inv_freq = nullptr;
  float out_factor = 1.0f;
  int out_pairs = 0;
  // compressed key slots per row: 0, topk (CSA) or capacity (HCA)
  int cslots() const { return ratio == 0 ? 0 : (csa ? topk : static_cast<int>(capacity)); }
};

// The official softmax's slot order for row r (the reference's tiles run over it): the window's
// slots first (window_slots of them, the first n_window real, in position order), then the
// compressed ones; slot(t) is t's index in the row's probs (−1: padding).
struct OfficialSlots {
  int64_t first = 0, n_window = 0, window_slots = 0, n_slots = 0, W = 0, p = 0;
  DI_HD int slot(int64_t t) const {
    if (t < window_slots) return t < n_window ? static_cast<int>(first + t - (p - W + 1)) : -1;
    return static_cast<int>(W + (t - window_slots));
  }
};
DI_HD inline OfficialSlots official_slots(const Rows& rw, const AttnArgs& a, int64_t r) {
  OfficialSlots o;
  o.p = rw.pos[r];
  o.W = a.W;
  const int64_t p0 = rw.pos0[r], len = rw.len[r];
  o.first = o.p - a.W + 1 > 0 ? o.p - a.W + 1 : 0;
  o.n_window = o.p - o.first + 1;
  o.window_slots = p0 == 0 ? (len < a.W ? len : a.W) : a.W;
  int64_t n_comp = 0;
  if (a.ratio > 0) n_comp = a.csa ? a.cnt[r] : (o.p + 1) / a.ratio;
  o.n_slots = o.window_slots + n_comp;
  return o;
}
// The key of chunk row r at probability slot s (window slots first, then compressed), or null.
DI_HD inline const float* attn_key_at(const Rows& rw, const AttnArgs& a, int64_t r, int s) {
  const int64_t p = rw.pos[r], p0 = rw.pos0[r];
  const int64_t seq = rw.seq[r];
  if (s < a.W) {
    const int64_t qp = p - a.W + 1 + s;
    if (qp < 0) return nullptr;
    if (qp >= p0) return a.kv + (rw.start[r] + (qp - p0)) * a.D;
    return a.ring + (seq * a.W + qp % a.W) * a.D;
  }
  const int64_t c = s - a.W;
  if (a.csa) {
    if (c >= a.cnt[r]) return nullptr;
    return a.cmp + entry_row(a.pages, seq, a.sel[r * a.topk + c]) * a.D;
  }
  if (c >= (p + 1) / a.ratio) return nullptr;
  return a.cmp + entry_row(a.pages, seq, c) * a.D;
}

// o [n, H, D] = softmax over window ∪ compressed keys (sink as an extra logit) · keys.
// probs: scratch [n, H, W + cslots]. True where o also had the inverse RoPE of a.out_pairs applied
// (and its rounding); otherwise that is the caller's.
bool attention(Exec& e, const Rows& rows, const AttnArgs& a, float* probs, float* o);
// ring[seq][p mod W] = kv row, for the last W rows of each segment.
void ring_write(Exec& e, const Rows& rows, const float* kv, float* ring, int W, int D);

}  // namespace deepinfer::cuda
