// compressor_push with its positions in parallel: the reference body walks a segment's rows one
// after another per channel (a prefill chunk of 8,192 rows is 8,192 dependent steps on 512
// threads), though an entry depends only on its own window (and, overlapping, the one before).
// Here one thread per (row, channel) pools the window that row closes, reading each position
// from the chunk or, before the chunk, from the state; then one thread per (segment, slot,
// channel) leaves the state as the reference's last step would. Same operations in the same
// order as the reference: the entries and the state are bit-identical.

#include "backend/cuda/attention.cuh"

namespace deepinfer::cuda {
namespace {

bool g_fast_compressor = env_switch("DEEPINFER_CUDA_FAST_COMPRESSOR", true);

// Position q's value and score (ape added) on channel ch of one sequence's compressor: from the
// chunk row when q is in the chunk, else from the state row the reference keeps it in (the open
// window's rows, or, overlapping, the previous window's).
struct PositionReader {
  const float *a, *g, *ape, *kv, *sc;
  int64_t start, pos0;
  int r, W;
  bool overlap;
  DI_HD void read(int64_t q, int ch, float& v, float& s) const {
    const int slot = static_cast<int>(((q % r) + r) % r);
    if (q >= pos0) {
      const int64_t row = start + (q - pos0);
      v = a[row * W + ch];
      s = g[row * W + ch] + ape[slot * W + ch];
      return;
    }
    const int64_t open0 = pos0 / r * r;  // first position of the window open at pos0
    const int srow = overlap && q >= open0 ? r + slot : slot;
    v = kv[srow * W + ch];
    s = sc[srow * W + ch];
  }
};

}  // namespace

bool compressor_fast() { return g_fast_compressor; }
void set_compressor_fast(bool on) { g_fast_compressor = on; }

void compressor_push_fast(Exec& e, const Rows& rows, const Segments& segs, const float* a,
                          const float* g, const float* ape, const CompressorBuffers& c) {
  const CompressorBuffers cb = c;
  const Rows rw = rows;
  const int dc = c.dim;
  // Entries: the rows whose position closes a window.
  e.each(rows.n * dc, [=] DI_HD(int64_t i) {
    const int64_t row = i / dc;
    const int k = static_cast<int>(i % dc);
    const int r = cb.ratio, W = cb.width;
    const int64_t p = rw.pos[row];
    if ((p + 1) % r != 0) return;
    const int seq = rw.seq[row];
    const PositionReader in{a,
                            g,
                            ape,
                            cb.kv + int64_t{seq} * cb.rows * W,
                            cb.score + int64_t{seq} * cb.rows * W,
                            rw.start[row],
                            rw.pos0[row],
                            r,
                            W,
                            cb.overlap};
    const int64_t w0 = p + 1 - r;  // the window's first position
    float entry;
    if (!cb.overlap) {
      float m = -INFINITY, v, s;
      for (int q = 0; q < r; ++q) {
        in.read(w0 + q, k, v, s);
        m = fmaxf(m, s);
      }
      if (m == -INFINITY) {
        entry = 0.0f;
      } else {
        float sum = 0.0f, acc = 0.0f;
        for (int q = 0; q < r; ++q) {
          in.read(w0 + q, k, v, s);
          const float ex = expf(s - m);
          sum += ex;
          acc += ex * v;
        }
        entry = acc / sum;
      }
    } else {  // the previous window on channels [0, dc), this one on [dc, 2·dc)
      float m = -INFINITY, v, s;
      for (int q = 0; q < r; ++q) {
        in.read(w0 - r + q, k, v, s);
        m = fmaxf(m, s);
      }
      for (int q = 0; q < r; ++q) {
        in.read(w0 + q, dc + k, v, s);
        m = fmaxf(m, s);
      }
      float sum = 0.0f, acc = 0.0f;
      for (int q = 0; q < r; ++q) {
        in.read(w0 - r + q, k, v, s);
        const float ex = expf(s - m);
        sum += ex;
        acc += ex * v;
      }
      for (int q = 0; q < r; ++q) {
        in.read(w0 + q, dc + k, v, s);
        const float ex = expf(s - m);
        sum += ex;
        acc += ex * v;
      }
      entry = acc / sum;
    }
    cb.store[entry_row(cb.pages, seq, p / r) * dc + k] = entry;
  });
  // The state after the chunk: each slot holds the last position of the chunk that maps to it
  // (or keeps what it had); overlapping, rows [0, r) hold the last window that closed.
  const Segments sg = segs;
  const int64_t per_seg = int64_t{c.ratio} * dc;
  e.each(segs.n * per_seg, [=] DI_HD(int64_t i) {
    const int64_t sgi = i / per_seg;
    const int q = static_cast<int>(i % per_seg / dc), k = static_cast<int>(i % dc);
    const int r = cb.ratio, W = cb.width;
    const int seq = sg.seq[sgi];
    float* kv = cb.kv + int64_t{seq} * cb.rows * W;
    float* sc = cb.score + int64_t{seq} * cb.rows * W;
    const int64_t pos0 = sg.pos0[sgi], end = pos0 + sg.len[sgi];
    const PositionReader in{a, g, ape, kv, sc, sg.row0[sgi], pos0, r, W, cb.overlap};
    const int64_t last = end - 1 < q ? -1 : q + (end - 1 - q) / r * r;  // ≡ q (mod r)
    const int cur = cb.overlap ? r + q : q;
    for (int half = 0; half < (cb.overlap ? 2 : 1); ++half) {
      const int ch = half * dc + k;
      float pv = 0.0f, ps = 0.0f;
      const int64_t closed = end / r - 1;  // the last window that closed in the chunk, if any
      const bool shift = cb.overlap && closed >= pos0 / r;
      if (shift) in.read(closed * r + q, ch, pv, ps);  // before the writes below: reads row cur
      if (last >= pos0) {
        float v, s;
        in.read(last, ch, v, s);
        kv[cur * W + ch] = v;
        sc[cur * W + ch] = s;
      }
      if (shift) {
        kv[q * W + ch] = pv;
        sc[q * W + ch] = ps;
      }
    }
  });
}

}  // namespace deepinfer::cuda
