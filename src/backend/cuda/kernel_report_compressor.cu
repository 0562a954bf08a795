// compressor_push_fast against the reference body (attention.cu): random states (scores partly
// −inf), launches of several segments that start inside windows, then a second launch that
// continues them; the entry stores and the states must be bit-identical. On the device also an
// 8,192-row chunk of each V4-Flash compressor shape, with both times, and compressor_finish's
// block-per-entry kernel against its reference body.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/attention.cuh"
#include "backend/cuda/cuda_model.h"
#include "backend/cuda/kernel_report.h"
#include "backend/cuda/kernel_report_measure.cuh"

namespace deepinfer::cuda {
namespace {

struct Seg {
  int seq, pos0, len;
};

// One launch's rows and segments, uploaded.
struct Launch {
  DeviceArray<int32_t> meta;
  DeviceArray<float> a, g;
  Rows rows;
  Segments segs;
};

Launch make_launch(Exec& e, const std::vector<Seg>& segs, int width, std::mt19937& rng) {
  int64_t n = 0;
  for (const Seg& s : segs) n += s.len;
  const int64_t S = static_cast<int64_t>(segs.size());
  std::vector<int32_t> h(static_cast<size_t>(6 * n + 4 * S));
  int64_t r = 0;
  for (int64_t i = 0; i < S; ++i) {
    const Seg& s = segs[static_cast<size_t>(i)];
    h[6 * n + i] = static_cast<int32_t>(r);
    h[6 * n + S + i] = s.seq;
    h[6 * n + 2 * S + i] = s.pos0;
    h[6 * n + 3 * S + i] = s.len;
    const int64_t row0 = r;
    for (int t = 0; t < s.len; ++t, ++r) {
      h[n + r] = s.seq;
      h[2 * n + r] = s.pos0 + t;
      h[3 * n + r] = static_cast<int32_t>(row0);
      h[4 * n + r] = s.pos0;
      h[5 * n + r] = s.len;
    }
  }
  Launch l;
  l.meta.upload(e, h);
  const int32_t* m = l.meta.ptr;
  l.rows = Rows{m, m + n, m + 2 * n, m + 3 * n, m + 4 * n, m + 5 * n, n};
  l.segs = Segments{m + 6 * n, m + 6 * n + S, m + 6 * n + 2 * S, m + 6 * n + 3 * S, S};
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> ha(static_cast<size_t>(n * width)), hg(ha.size());
  for (auto& v : ha) v = gauss(rng);
  for (auto& v : hg) v = 2.0f * gauss(rng);
  l.a.upload(e, ha);
  l.g.upload(e, hg);
  return l;
}

// A compressor's buffers for `slots` sequences with a random state and a zero store.
struct Buffers {
  DeviceArray<float> kv, score, store;
  CompressorBuffers cb;
};

void make_buffers(Exec& e, Buffers& b, int ratio, int dim, bool overlap, int slots,
                  int64_t capacity, const std::vector<float>& kv, const std::vector<float>& sc) {
  b.cb.ratio = ratio;
  b.cb.dim = dim;
  b.cb.overlap = overlap;
  b.cb.width = (overlap ? 2 : 1) * dim;
  b.cb.rows = (overlap ? 2 : 1) * ratio;
  b.cb.capacity = capacity;
  b.cb.pages = dense_pages(capacity);
  b.kv.upload(e, kv);
  b.score.upload(e, sc);
  b.store.upload(e, std::vector<float>(static_cast<size_t>(slots * capacity * dim), 0.0f));
  b.cb.kv = b.kv.ptr;
  b.cb.score = b.score.ptr;
  b.cb.store = b.store.ptr;
}

std::vector<float> fetch(Exec& e, const DeviceArray<float>& a) {
  std::vector<float> h(a.count);
  e.to_host(h.data(), a.ptr, a.bytes());
  return h;
}

int64_t bit_mismatches(const std::vector<float>& x, const std::vector<float>& y) {
  int64_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i) bad += std::memcmp(&x[i], &y[i], sizeof(float)) != 0;
  return bad;
}

// Reference and fast push over the same launches from the same state; what differs.
KernelCheck check(Exec& e, const std::string& what, int ratio, int dim, bool overlap,
                  const std::vector<std::vector<Seg>>& launches, bool timed, std::mt19937& rng) {
  constexpr int kSlots = 3;
  int max_pos = 0;
  for (const auto& l : launches)
    for (const Seg& s : l) max_pos = std::max(max_pos, s.pos0 + s.len);
  const int64_t capacity = max_pos / ratio + 1;
  const int width = (overlap ? 2 : 1) * dim, rows = (overlap ? 2 : 1) * ratio;
  std::vector<float> kv(static_cast<size_t>(kSlots) * rows * width), sc(kv.size());
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (size_t i = 0; i < kv.size(); ++i) {
    kv[i] = gauss(rng);
    sc[i] = i % 7 == 0 ? -INFINITY : gauss(rng);
  }
  std::vector<float> ape(static_cast<size_t>(ratio) * width);
  for (auto& v : ape) v = gauss(rng);
  DeviceArray<float> ape_d;
  ape_d.upload(e, ape);
  Buffers ref, fast;
  make_buffers(e, ref, ratio, dim, overlap, kSlots, capacity, kv, sc);
  make_buffers(e, fast, ratio, dim, overlap, kSlots, capacity, kv, sc);
  double ms_ref = 0, ms_fast = 0;
  for (const auto& segs : launches) {
    const Launch l = make_launch(e, segs, width, rng);
    const bool fast0 = compressor_fast();
    set_compressor_fast(false);
    compressor_push(e, l.rows, l.segs, l.a.ptr, l.g.ptr, ape_d.ptr, ref.cb);
    set_compressor_fast(fast0);
    compressor_push_fast(e, l.rows, l.segs, l.a.ptr, l.g.ptr, ape_d.ptr, fast.cb);
    if (timed) {  // repeated pushes of the same rows: the times, not the results, are kept
      Buffers scratch;
      make_buffers(e, scratch, ratio, dim, overlap, kSlots, capacity, kv, sc);
      set_compressor_fast(false);
      ms_ref = time_ms(e, 3, [&] {
        compressor_push(e, l.rows, l.segs, l.a.ptr, l.g.ptr, ape_d.ptr, scratch.cb);
      });
      set_compressor_fast(fast0);
      ms_fast = time_ms(e, 3, [&] {
        compressor_push_fast(e, l.rows, l.segs, l.a.ptr, l.g.ptr, ape_d.ptr, scratch.cb);
      });
    }
  }
  const int64_t bad = bit_mismatches(fetch(e, ref.store), fetch(e, fast.store)) +
                      bit_mismatches(fetch(e, ref.kv), fetch(e, fast.kv)) +
                      bit_mismatches(fetch(e, ref.score), fetch(e, fast.score));
  KernelCheck kc;
  kc.tolerance = 0;
  kc.rel_error = e.sync().ok() ? static_cast<double>(bad) : 1.0;
  char line[256];
  if (timed) {
    std::snprintf(line, sizeof line, "%-52s reference %8.3f ms  fast %7.3f ms  %lld values differ",
                  what.c_str(), ms_ref, ms_fast, static_cast<long long>(bad));
  } else {
    std::snprintf(line, sizeof line, "%-52s %lld values differ", what.c_str(),
                  static_cast<long long>(bad));
  }
  kc.line = line;
  return kc;
}

// compressor_finish's block-per-entry kernel against the reference body: random raw entries of
// three sequences, 5 of them finished (the launch sized for 7, as the decode graph sizes it).
KernelCheck finish_check(Exec& e, const std::string& what, int dim, int pairs, bool index_keys,
                         bool official, std::mt19937& rng) {
  constexpr int kSlots = 3, kCapacity = 40, kRatio = 4;
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::vector<float> store(static_cast<size_t>(kSlots * kCapacity * dim));
  for (auto& v : store) v = 3.0f * gauss(rng);
  std::vector<float> norm(static_cast<size_t>(dim)),
      inv(static_cast<size_t>(pairs > 0 ? pairs : 1));
  for (auto& v : norm) v = 1.0f + 0.2f * gauss(rng);
  for (size_t q = 0; q < inv.size(); ++q)
    inv[q] = std::pow(10000.0f, -2.0f * static_cast<float>(q) / static_cast<float>(2 * pairs + 1));
  const std::vector<int32_t> seq = {0, 2, 1, 2, 0, 0, 0}, j = {3, 17, 0, 39, 12, 0, 0};
  DeviceArray<float> norm_d, inv_d;
  DeviceArray<int32_t> seq_d, j_d, count_d;
  norm_d.upload(e, norm);
  inv_d.upload(e, inv);
  seq_d.upload(e, seq);
  j_d.upload(e, j);
  count_d.upload(e, std::vector<int32_t>{5});
  const std::vector<float> none(static_cast<size_t>(kSlots * 2 * kRatio * 2 * dim), 0.0f);
  Buffers ref, fast;
  for (Buffers* b : {&ref, &fast}) {
    make_buffers(e, *b, kRatio, dim, true, kSlots, kCapacity, none, none);
    b->store.upload(e, store);
    b->cb.store = b->store.ptr;
  }
  const auto finish = [&](Buffers& b) {
    compressor_finish(e, b.cb, seq_d.ptr, j_d.ptr, count_d.ptr, 7, norm_d.ptr, 1e-6f, inv_d.ptr,
                      1.25f, pairs, index_keys, official);
  };
  const bool fast0 = compressor_fast();
  set_compressor_fast(false);
  finish(ref);
  const double ms_ref = time_ms(e, 3, [&] { finish(ref); });
  set_compressor_fast(true);
  finish(fast);
  const double ms_fast = time_ms(e, 3, [&] { finish(fast); });
  set_compressor_fast(fast0);
  // The timed repeats finish the same rows again: compare one finish of fresh copies.
  for (Buffers* b : {&ref, &fast}) b->store.upload(e, store), b->cb.store = b->store.ptr;
  set_compressor_fast(false);
  finish(ref);
  set_compressor_fast(true);
  finish(fast);
  set_compressor_fast(fast0);
  const int64_t bad = bit_mismatches(fetch(e, ref.store), fetch(e, fast.store));
  const int64_t changed = bit_mismatches(fetch(e, ref.store), store);
  KernelCheck kc;
  kc.tolerance = 0;
  // Also fails if the reference left the rows as they were (nothing was checked).
  kc.rel_error = e.sync().ok() && changed >= 5 * dim / 2 ? static_cast<double>(bad) : 1.0;
  char line[256];
  std::snprintf(line, sizeof line,
                "%-52s reference %8.4f ms  fast %7.4f ms  %lld values differ (%lld changed)",
                what.c_str(), ms_ref, ms_fast, static_cast<long long>(bad),
                static_cast<long long>(changed));
  kc.line = line;
  return kc;
}

}  // namespace

std::vector<KernelCheck> compressor_kernel_report(bool emulate) {
  std::vector<KernelCheck> out;
  int count = 0;
  if (!emulate && (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)) return out;
  Exec e;
  e.emulate = emulate;
  if (!emulate) cudaStreamCreate(&e.stream);
  std::mt19937 rng(47);
  // Three sequences that start inside windows, one closing none; then two of them continue.
  const std::vector<std::vector<Seg>> launches = {{{0, 6, 37}, {2, 0, 300}, {1, 130, 5}},
                                                  {{0, 43, 260}, {1, 135, 1}}};
  const int dim = emulate ? 32 : 512;
  out.push_back(check(e, "compressor push, ratio 4, overlapping, 2 launches", 4, dim, true,
                      launches, false, rng));
  out.push_back(
      check(e, "compressor push, ratio 128, 2 launches", 128, dim, false, launches, false, rng));
  if (!emulate) {
    const std::vector<std::vector<Seg>> chunk = {{{0, 0, 8192}}};
    out.push_back(check(e, "compressor push, ratio 4 x 512, overlapping, 8192 rows", 4, 512, true,
                        chunk, true, rng));
    out.push_back(check(e, "index compressor push, ratio 4 x 128, overlapping, 8192 rows", 4, 128,
                        true, chunk, true, rng));
    out.push_back(
        check(e, "compressor push, ratio 128 x 512, 8192 rows", 128, 512, false, chunk, true, rng));
    out.push_back(
        finish_check(e, "compressor finish, 512 (64 RoPE), official", 512, 32, false, true, rng));
    out.push_back(
        finish_check(e, "compressor finish, 512 (64 RoPE), exact", 512, 32, false, false, rng));
    out.push_back(finish_check(e, "index compressor finish, 128 (64 RoPE), official", 128, 32, true,
                               true, rng));
  }
  if (e.error != cudaSuccess) {
    KernelCheck kc;
    kc.line = std::string("CUDA error in the compressor checks: ") + cudaGetErrorString(e.error);
    kc.rel_error = 1;
    out.push_back(kc);
  }
  if (!emulate) cudaStreamDestroy(e.stream);
  return out;
}

}  // namespace deepinfer::cuda
