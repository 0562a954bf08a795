// Device self-check of the fast attention-side and per-row kernels (fast_ops.cuh) against their
// reference bodies on random inputs, at V4-Flash sizes (one row = a batch-1 decode step's call)
// and at the test fixtures' sizes with their prefill launches (hundreds of rows, several segments,
// full windows, more visible entries than top-k): each must return the same bits, and its time
// beside the reference body's is reported. Outputs are filled with NaN before each checked run, so
// a kernel that leaves values unwritten (a launch too small, skipped or failed) is caught.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "backend/cuda/attention_tc.cuh"
#include "backend/cuda/fast_ops.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/indexer_tc.cuh"
#include "backend/cuda/kernel_report.h"
#include "backend/cuda/kernel_report_ctx.cuh"
#include "backend/cuda/v41_ops.cuh"

namespace deepinfer::cuda {
namespace {

// The split-KV attention (attention_split.cu, forced on) against the reference body, within
// rounding: ‖split − reference‖∞ / ‖reference‖∞ ≤ tol, no NaN; its time beside the one-block
// kernel's (where that fits) and the reference body's.
template <class Run, class Out>
void check_split(Ctx& c, std::vector<KernelCheck>& out, const std::string& what, double tol,
                 bool one_block, Run run, Out outputs) {
  set_fast_kernels(false);
  run(true);
  const auto ref = outputs();
  set_fast_kernels(true);
  set_split_kv_mode(1);
  run(true);
  const auto fast = outputs();
  double worst = 0, top = 0;
  int64_t differ = 0;
  bool ok = c.e.sync().ok() && ref.size() == fast.size() && nans(ref) == 0 && nans(fast) == 0;
  for (size_t i = 0; ok && i < ref.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(fast[i] - ref[i])));
    top = std::max(top, static_cast<double>(std::fabs(ref[i])));
    differ += fast[i] != ref[i];
  }
  const double rel = ok ? (top > 0 ? worst / top : worst) : 1.0;
  const double ms_split = time_ms(c, 20, [&] { run(false); });
  set_split_kv_mode(0);
  const double ms_one = one_block ? time_ms(c, 20, [&] { run(false); }) : 0.0;
  set_split_kv_mode(-1);
  set_fast_kernels(false);
  const double ms_ref = time_ms(c, 2, [&] { run(false); });
  set_fast_kernels(true);
  char line[360];
  std::snprintf(
      line, sizeof line,
      "%-52s split %8.4f ms  one-block %8.4f ms  reference %8.4f ms  rel %.2g (bar %.0g), "
      "%lld of %zu values differ",
      what.c_str(), ms_split, ms_one, ms_ref, rel, tol, static_cast<long long>(differ), ref.size());
  KernelCheck kc;
  kc.line = line;
  kc.rel_error = rel;
  kc.tolerance = tol;
  out.push_back(kc);
}

struct TestRows {
  std::vector<int32_t> seq, pos, start, pos0, len;
  DeviceArray<int32_t> d;
  Rows rows(int64_t n) const {
    const int64_t N = static_cast<int64_t>(seq.size());
    return Rows{d.ptr, d.ptr, d.ptr + N, d.ptr + 2 * N, d.ptr + 3 * N, d.ptr + 4 * N, n};
  }
  int64_t n() const { return static_cast<int64_t>(seq.size()); }
};

struct Segment {
  int seq, pos0, len;
};

TestRows test_rows(Exec& e, std::initializer_list<Segment> segments) {
  TestRows t;
  auto add = [&](int s, int p0, int len) {
    const int row0 = static_cast<int>(t.seq.size());
    for (int i = 0; i < len; ++i) {
      t.seq.push_back(s);
      t.pos.push_back(p0 + i);
      t.start.push_back(row0);
      t.pos0.push_back(p0);
      t.len.push_back(len);
    }
  };
  for (const Segment& s : segments) add(s.seq, s.pos0, s.len);
  std::vector<int32_t> all;
  for (const auto* v : {&t.seq, &t.pos, &t.start, &t.pos0, &t.len})
    all.insert(all.end(), v->begin(), v->end());
  t.d.upload(e, all);
  return t;
}

constexpr int kSlots = 6;

// The sizes of one configuration's attention side.
struct Shape {
  std::string name;
  int H, D, rope, W, topk;         // attention heads, head_dim, its RoPE dims, window, index top-k
  int64_t csa_cap, hca_cap;        // entries stored per sequence at ratio 4 and 128
  int index_heads, index_dim, hc;  // the indexer's heads and head_dim; hc_mult
  int64_t d;                       // hidden size
  int sinkhorn_iters;
};

// cnt/sel as the indexer leaves them: the first min(vis, topk) entries of a random order.
void random_selection(Ctx& c, const TestRows& t, int ratio, int topk, std::vector<int32_t>& cnt,
                      std::vector<int32_t>& sel) {
  cnt.assign(static_cast<size_t>(t.n()), 0);
  sel.assign(static_cast<size_t>(t.n() * topk), 0);
  for (int64_t r = 0; r < t.n(); ++r) {
    const int vis = (t.pos[static_cast<size_t>(r)] + 1) / ratio;
    std::vector<int32_t> ids(static_cast<size_t>(vis));
    for (int i = 0; i < vis; ++i) ids[static_cast<size_t>(i)] = i;
    std::shuffle(ids.begin(), ids.end(), c.rng);
    cnt[static_cast<size_t>(r)] = std::min(vis, topk);
    for (int i = 0; i < cnt[static_cast<size_t>(r)]; ++i)
      sel[static_cast<size_t>(r * topk + i)] = ids[static_cast<size_t>(i)];
  }
}

// ns: the row counts to check (the first n rows of t).
// split: the split-KV kernel within rounding (check_split) instead of the one-block kernel's bits;
// ratios: CSA (4) and/or HCA (128).
void attention_checks(Ctx& c, std::vector<KernelCheck>& out, const Shape& sh, const TestRows& t,
                      std::initializer_list<int64_t> ns, bool split = false,
                      std::initializer_list<int> ratios = {4, 128}) {
  const int H = sh.H, D = sh.D, window = sh.W, topk = sh.topk;
  for (int ratio : ratios) {
    const bool csa = ratio == 4;
    const int64_t cap = csa ? sh.csa_cap : sh.hca_cap;
    DeviceArray<float> q, kv, ring, cmp, sink, probs, o;
    DeviceArray<int32_t> sel, cnt;
    q.upload(c.e, normal(c, static_cast<size_t>(t.n() * H * D)));
    kv.upload(c.e, normal(c, static_cast<size_t>(t.n() * D)));
    ring.upload(c.e, normal(c, static_cast<size_t>(kSlots * window * D)));
    cmp.upload(c.e, normal(c, static_cast<size_t>(kSlots * cap * D)));
    sink.upload(c.e, normal(c, H));
    std::vector<int32_t> hcnt, hsel;
    random_selection(c, t, ratio, topk, hcnt, hsel);
    cnt.upload(c.e, hcnt);
    sel.upload(c.e, hsel);
    AttnArgs a;
    a.q = q.ptr;
    a.kv = kv.ptr;
    a.ring = ring.ptr;
    a.cmp = cmp.ptr;
    a.sel = sel.ptr;
    a.cnt = cnt.ptr;
    a.sink = sink.ptr;
    a.capacity = cap;
    a.pages = dense_pages(cap);
    a.H = H;
    a.D = D;
    a.W = window;
    a.ratio = ratio;
    a.topk = topk;
    a.csa = csa;
    a.scale = 1.0f / std::sqrt(static_cast<float>(D));
    probs.allocate(c.e, static_cast<size_t>(t.n() * H * (window + a.cslots())));
    o.allocate(c.e, static_cast<size_t>(t.n() * H * D));
    for (bool official : {false, true}) {
      a.official = official;
      if (split) {
        a.scratch = t.n() * H * (window + a.cslots() + int64_t{D} * 64);
        probs.allocate(c.e, static_cast<size_t>(a.scratch));
        // The reference's official softmax holds 128 tiles (8,192 slots); past them the official
        // split is held to the exact reference body (bf16 q and weights: well inside 1e-2).
        const bool beyond = official && window + a.cslots() > 64 * 128;
        for (int64_t n : ns) {
          const std::string what = sh.name + " split-KV " + (csa ? "CSA" : "HCA") +
                                   (official ? " official" : " exact") +
                                   (beyond ? " vs exact ref" : "") + ", " + std::to_string(n) +
                                   (n == 1 ? " row" : " rows");
          check_split(
              c, out, what, official ? 1e-2 : 1e-5, attention_fast_supported(a),
              [&](bool reset) {
                if (reset) poison(c, o);
                AttnArgs b = a;
                if (beyond && !fast_kernels()) b.official = false;
                attention(c.e, t.rows(n), b, probs.ptr, o.ptr);
              },
              [&] {
                std::vector<float> v = to_host(c, o);
                v.resize(static_cast<size_t>(n * H * D));
                return v;
              });
        }
        continue;
      }
      if (!attention_fast_supported(a)) continue;
      set_split_kv_mode(0);  // the one-block kernel's bits
      for (int64_t n : ns) {
        const std::string what = sh.name + " attention " + (csa ? "CSA" : "HCA") +
                                 (official ? " official" : " exact") + ", " + std::to_string(n) +
                                 (n == 1 ? " row" : " rows");
        check(
            c, out, what,
            [&](bool, bool reset) {
              if (reset) poison(c, o);
              attention(c.e, t.rows(n), a, probs.ptr, o.ptr);
            },
            [&] {
              std::vector<float> v = to_host(c, o);
              v.resize(static_cast<size_t>(n * H * D));  // the rows of this launch
              return v;
            });
      }
      set_split_kv_mode(-1);
    }
  }
}

// flat: one key repeated over the slots 1, 3, 5 (every score of those rows ties, so the top-k is
// decided by ids alone); otherwise every third key repeats the one before it.
void indexer_checks(Ctx& c, std::vector<KernelCheck>& out, const Shape& sh, const TestRows& t,
                    std::initializer_list<int64_t> ns, bool flat = false) {
  const int ih = sh.index_heads, ihd = sh.index_dim, ratio = 4, topk = sh.topk;
  const int64_t cap = sh.csa_cap;
  std::vector<float> keys = normal(c, static_cast<size_t>(kSlots * cap * ihd));
  for (int64_t j = 1; j < kSlots * cap; ++j) {
    const bool tie = flat ? (j / cap) % 2 == 1 && j % cap != 0 : j % 3 == 2;
    if (tie)
      std::memcpy(&keys[static_cast<size_t>(j * ihd)], &keys[static_cast<size_t>((j - 1) * ihd)],
                  ihd * sizeof(float));
  }
  DeviceArray<float> k, q, w, scores;
  DeviceArray<int32_t> sel, cnt;
  k.upload(c.e, keys);
  q.upload(c.e, normal(c, static_cast<size_t>(t.n() * ih * ihd)));
  w.upload(c.e, normal(c, static_cast<size_t>(t.n() * ih), 0.125f));
  scores.allocate(c.e, static_cast<size_t>(t.n() * cap));
  sel.allocate(c.e, static_cast<size_t>(t.n() * topk));
  cnt.allocate(c.e, static_cast<size_t>(t.n()));
  for (bool official : {false, true}) {
    IndexerArgs a{q.ptr, w.ptr, k.ptr, cap, ih, ihd, ratio, topk, official, dense_pages(cap)};
    if (!indexer_fast_supported(a)) continue;
    for (int64_t n : ns) {
      const std::string what = sh.name + " indexer scores + top-k" +
                               (official ? " official" : " exact") + (flat ? ", tied" : "") + ", " +
                               std::to_string(n) + (n == 1 ? " row" : " rows");
      check(
          c, out, what,
          [&](bool, bool reset) {
            if (reset) {
              poison(c, scores);
              poison(c, sel);
              poison(c, cnt);
            }
            indexer_topk(c.e, t.rows(n), a, scores.ptr, sel.ptr, cnt.ptr);
          },
          [&] {  // scores, counts and the selected ids (the first cnt of each row)
            std::vector<float> v = to_host(c, scores);
            v.resize(static_cast<size_t>(n * cap));
            const std::vector<int32_t> hc = to_host(c, cnt), hs = to_host(c, sel);
            for (int64_t r = 0; r < n; ++r) {
              v.push_back(static_cast<float>(hc[static_cast<size_t>(r)]));
              for (int i = 0; i < hc[static_cast<size_t>(r)] && i < topk; ++i)
                v.push_back(static_cast<float>(hs[static_cast<size_t>(r * topk + i)]));
            }
            return v;
          });
    }
  }
}

// V4.1's top-k in id order (v41::select_topk_by_id) over bf16-rounded random scores (so many
// tie) of S entries per row.
void v41_topk_checks(Ctx& c, std::vector<KernelCheck>& out, const TestRows& t, int64_t S, int K) {
  std::vector<float> hs = normal(c, static_cast<size_t>(t.n() * S));
  for (float& v : hs) v = std::round(v * 64.0f) / 64.0f;
  DeviceArray<float> sc;
  DeviceArray<int32_t> tk;
  DeviceArray<uint8_t> flags;
  sc.upload(c.e, hs);
  tk.allocate(c.e, static_cast<size_t>(t.n() * K));
  flags.allocate(c.e, static_cast<size_t>(t.n() * S));
  check(
      c, out, "v4.1 top-" + std::to_string(K) + " by id, " + std::to_string(t.n()) + " rows",
      [&](bool, bool reset) {
        if (reset) poison(c, tk);
        v41::select_topk_by_id(c.e, t.rows(t.n()), sc.ptr, S, 4, K, flags.ptr, tk.ptr);
      },
      [&] {
        const std::vector<int32_t> h = to_host(c, tk);
        return std::vector<float>(h.begin(), h.end());
      });
}

// argmax over the vocabulary (the greedy pick): bf16-rounded logits so the maximum often ties
// (the lowest index must win), some masked to −inf (structured output), one row all −inf, a
// vocabulary that is a multiple of 4 (float4 loads) and one that is not.
void argmax_checks(Ctx& c, std::vector<KernelCheck>& out) {
  for (const int64_t V : {int64_t{129280}, int64_t{129283}}) {
    for (const int64_t n : {int64_t{1}, int64_t{16}}) {
      std::vector<float> hx = normal(c, static_cast<size_t>(n * V), 1.0f);
      for (size_t i = 0; i < hx.size(); ++i) hx[i] = i % 7 == 3 ? -INFINITY : bf16r(hx[i]);
      if (n > 1) std::fill(hx.begin() + V, hx.begin() + 2 * V, -INFINITY);
      DeviceArray<float> x;
      DeviceArray<int32_t> idx;
      x.upload(c.e, hx);
      idx.allocate(c.e, static_cast<size_t>(n));
      check(
          c, out,
          "argmax over " + std::to_string(V) + " logits, " + std::to_string(n) +
              (n == 1 ? " row" : " rows"),
          [&](bool, bool reset) {
            if (reset) poison(c, idx);
            argmax_rows(c.e, x.ptr, n, V, idx.ptr);
          },
          [&] {
            const std::vector<int32_t> h = to_host(c, idx);
            return std::vector<float>(h.begin(), h.end());
          });
    }
  }
}

void row_checks(Ctx& c, std::vector<KernelCheck>& out, const Shape& sh,
                std::initializer_list<int64_t> ns) {
  const int H = sh.H, D = sh.D, R = sh.rope;
  for (int64_t n : ns) {
    const std::vector<float> hq = normal(c, static_cast<size_t>(n * H * D), 3.0f);
    DeviceArray<float> q;
    q.upload(c.e, hq);
    check(
        c, out, sh.name + " q head norm official, " + std::to_string(n) + " token(s)",
        [&](bool, bool reset) {
          if (reset) c.e.to_device(q.ptr, hq.data(), q.bytes());
          q_head_norm_official(c.e, q.ptr, n * H, D, 1e-6f);
        },
        [&] { return to_host(c, q); });
    {  // the same with the rows' RoPE in the launch, against the norm then rope()
      const std::vector<float> hinv = rope_inv_freq(R);
      std::vector<int32_t> hpos(static_cast<size_t>(n));
      for (size_t i = 0; i < hpos.size(); ++i) hpos[i] = static_cast<int32_t>(4095 - 37 * i);
      DeviceArray<float> inv;
      DeviceArray<int32_t> pos;
      inv.upload(c.e, hinv);
      pos.upload(c.e, hpos);
      const RopeRows rr{inv.ptr, 1.25f, pos.ptr, H, R / 2};
      check(
          c, out, sh.name + " q head norm + rope official, " + std::to_string(n) + " token(s)",
          [&](bool, bool reset) {
            if (reset) c.e.to_device(q.ptr, hq.data(), q.bytes());
            q_head_norm_rope_official(c.e, q.ptr, n * H, D, 1e-6f, rr);
          },
          [&] { return to_host(c, q); });
    }
    const std::vector<float> hkv = normal(c, static_cast<size_t>(n * D), 2.0f);
    DeviceArray<float> kv;
    kv.upload(c.e, hkv);
    check(
        c, out, sh.name + " kv rows official, " + std::to_string(n) + " token(s)",
        [&](bool, bool reset) {
          if (reset) c.e.to_device(kv.ptr, hkv.data(), kv.bytes());
          kv_rows_official(c.e, kv.ptr, n, D, R);
        },
        [&] { return to_host(c, kv); });
  }
  for (int64_t n : ns) {
    const int64_t rows = n * sh.index_heads;
    const std::vector<float> hx = normal(c, static_cast<size_t>(rows * sh.index_dim), 2.0f);
    DeviceArray<float> ix;
    ix.upload(c.e, hx);
    check(
        c, out, sh.name + " indexer rows official, " + std::to_string(n) + " token(s)",
        [&](bool, bool reset) {
          if (reset) c.e.to_device(ix.ptr, hx.data(), ix.bytes());
          indexer_rows_official(c.e, ix.ptr, rows, sh.index_dim);
        },
        [&] { return to_host(c, ix); });
  }
  const int hc = sh.hc;
  if (!hc_pre_fast_supported(hc)) return;
  const int64_t n = std::max(ns), d = sh.d;
  DeviceArray<float> mix, ss, base, scale, pre, post, comb;
  mix.upload(c.e, normal(c, static_cast<size_t>(n * (2 + hc) * hc), 40.0f));
  std::vector<float> hss = normal(c, static_cast<size_t>(n));
  for (auto& v : hss) v = static_cast<float>(hc * d) * (1.0f + std::fabs(v));
  ss.upload(c.e, hss);
  base.upload(c.e, normal(c, static_cast<size_t>((2 + hc) * hc)));
  scale.upload(c.e, normal(c, 3, 0.05f));
  pre.allocate(c.e, static_cast<size_t>(n * hc));
  post.allocate(c.e, static_cast<size_t>(n * hc));
  comb.allocate(c.e, static_cast<size_t>(n * hc * hc));
  const HcParams p{hc, sh.sinkhorn_iters, d, 1e-6f, 1e-6f, base.ptr, scale.ptr};
  check(
      c, out, sh.name + " mHC pre rows (Sinkhorn), " + std::to_string(n) + " tokens",
      [&](bool fast, bool reset) {
        if (reset) {
          poison(c, pre);
          poison(c, post);
          poison(c, comb);
        }
        if (fast) {
          hc_pre_rows_fast(c.e, p, mix.ptr, ss.ptr, n, pre.ptr, post.ptr, comb.ptr);
        } else {
          hc_pre_rows(c.e, p, nullptr, mix.ptr, n, pre.ptr, post.ptr, comb.ptr, ss.ptr);
        }
      },
      [&] {
        std::vector<float> v = to_host(c, pre), b = to_host(c, post), m = to_host(c, comb);
        v.insert(v.end(), b.begin(), b.end());
        v.insert(v.end(), m.begin(), m.end());
        return v;
      });
}

}  // namespace

std::vector<KernelCheck> op_kernel_report() {
  std::vector<KernelCheck> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return out;
  const bool fast0 = fast_kernels(), tc0 = attention_tc(), itc0 = indexer_tc();
  const bool fused0 = fused_rows();
  set_fused_rows(true);  // the q head norm + RoPE check
  // Not bitwise the reference: checked in kernel_report_attention_tc.cu / _indexer_tc.cu.
  set_attention_tc(false);
  set_indexer_tc(false);
  ReportDevice dev(11);
  Exec& e = dev.e;
  Ctx& c = dev.c;
  {
    // V4-Flash: four decodes (row 0 alone is a batch-1 step at position 4095) and two 3-row
    // prefill segments, one from position 0.
    const Shape flash{"flash", 64, 512, 64, 128, 512, 1100, 40, 64, 128, 4, 4096, 20};
    const TestRows t =
        test_rows(e, {{0, 4095, 1}, {1, 5, 1}, {2, 200, 1}, {3, 1000, 1}, {4, 10, 3}, {5, 0, 3}});
    attention_checks(c, out, flash, t, {1, t.n()});
    indexer_checks(c, out, flash, t, {1, t.n()});
    row_checks(c, out, flash, {1, 16});
    argmax_checks(c, out);
    // Long contexts for the radix-select top-k: 16,384 and 10,000 visible entries, exactly 512
    // (k = visible) and 513; the slots 1 and 3 again with every score tied.
    const Shape flash_long{"flash 64k", 64, 512, 64, 128, 512, 16384, 40, 64, 128, 4, 4096, 20};
    const TestRows lt =
        test_rows(e, {{0, 65535, 1}, {1, 39999, 1}, {2, 2047, 1}, {3, 2051, 1}, {4, 3, 1}});
    attention_checks(c, out, flash, t, {1, 4}, true);
    // Split-KV at long contexts: decodes at 65,535 and 40,000 (CSA, HCA); HCA at 524,287 and
    // 300,000 (4,096 entries + the window: past the one-block kernel's shared memory) and at
    // 1,048,575 and 700,000 (8,192 entries: past the reference's 128 official tiles too).
    const Shape flash_64k{"flash 64k", 64, 512, 64, 128, 512, 16384, 512, 64, 128, 4, 4096, 20};
    const TestRows t64 = test_rows(e, {{0, 65535, 1}, {1, 39999, 1}});
    attention_checks(c, out, flash_64k, t64, {1, 2}, true);
    const Shape flash_512k{"flash 512k", 64, 512, 64, 128, 512, 4, 4096, 64, 128, 4, 4096, 20};
    const TestRows t512 = test_rows(e, {{0, 524287, 1}, {1, 299999, 1}});
    attention_checks(c, out, flash_512k, t512, {1, 2}, true, {128});
    const Shape flash_1m{"flash 1M", 64, 512, 64, 128, 512, 4, 8192, 64, 128, 4, 4096, 20};
    const TestRows t1m = test_rows(e, {{0, 1048575, 1}, {1, 699999, 1}});
    attention_checks(c, out, flash_1m, t1m, {1, 2}, true, {128});
    indexer_checks(c, out, flash_long, lt, {lt.n()});
    indexer_checks(c, out, flash_long, lt, {lt.n()}, true);
    v41_topk_checks(c, out, lt, 16384, 512);
    // The fixtures hf_v4_b and official_v4_a (hc_mult 4): a 560-row prefill from position 0,
    // a 40-row chunk continuing a sequence at 300 (its window partly in the ring), a decode at
    // 519 and a 5-row prompt shorter than the window; stores sized for 768 positions.
    const TestRows p = test_rows(e, {{0, 0, 560}, {1, 300, 40}, {2, 519, 1}, {3, 0, 5}});
    const Shape hf_b{"hf_v4_b", 2, 128, 64, 48, 24, 192, 6, 4, 64, 4, 224, 25};
    const Shape off_a{"official_v4_a", 8, 96, 32, 24, 20, 192, 6, 2, 64, 4, 256, 9};
    for (const Shape* sh : {&hf_b, &off_a}) {
      attention_checks(c, out, *sh, p, {p.n()});
      indexer_checks(c, out, *sh, p, {p.n()});
      row_checks(c, out, *sh, {p.n()});
    }
  }
  dev.finish(out, "kernel checks");
  set_fast_kernels(fast0);
  set_attention_tc(tc0);
  set_indexer_tc(itc0);
  set_fused_rows(fused0);
  return out;
}

}  // namespace deepinfer::cuda
