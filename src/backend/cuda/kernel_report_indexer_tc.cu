// Device check of the tensor-core indexer scores (indexer_tc.cuh) against the reference body at
// V4-Flash indexer sizes (64 heads × 128, ratio 4, top-512, 2,048 entries a sequence), official
// numerics: q rows and keys through the official Hadamard + FP4 rows (so bf16-exact, as the model
// leaves them), decodes of 1 and 16 sequences near 4,096 positions and a 512-row prefill chunk at
// 7,680. Two checks a launch: the scores (≤ 1e-2 of the largest: a few bf16 ulps where a term's
// rounding moved) and the top-k (the share of each row's selected ids the reference also selects,
// averaged; ≥ 98 %), with the CUDA-core kernel's time beside the tensor cores', and the top-k by
// rank counting against the radix select (the same picks in the same order, bitwise).
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <unordered_set>

#include "backend/cuda/fast_ops.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/indexer_tc.cuh"
#include "backend/cuda/kernel_report.h"
#include "backend/cuda/kernel_report_launch.cuh"
#include "backend/cuda/kernel_report_measure.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kHeads = 64, kDim = 128, kRatio = 4, kTopk = 512;
constexpr int64_t kCap = 8192 / kRatio;

void check_launch(Exec& e, std::mt19937& rng, const CheckLaunch& l, std::vector<KernelCheck>& out) {
  const int64_t n = l.n();
  const int slots = l.slots();
  DeviceArray<int32_t> dm, sel, cnt;
  const Rows rows = l.upload(e, dm);
  DeviceArray<float> q, k, w, scores;
  q.upload(e, normal_values(rng, static_cast<size_t>(n * kHeads * kDim), 1.0f));
  k.upload(e, normal_values(rng, static_cast<size_t>(slots * kCap * kDim), 1.0f));
  std::vector<float> hw = normal_values(rng, static_cast<size_t>(n * kHeads), 0.125f);
  for (auto& x : hw) x = bf16r(x);
  w.upload(e, hw);
  indexer_rows_official(e, q.ptr, n * kHeads, kDim);  // FP4 values, power-of-two scales
  indexer_rows_official(e, k.ptr, slots * kCap, kDim);
  scores.allocate(e, static_cast<size_t>(n * kCap));
  sel.allocate(e, static_cast<size_t>(n * kTopk));
  cnt.allocate(e, static_cast<size_t>(n));
  const IndexerArgs a{q.ptr, w.ptr,  k.ptr, kCap, kHeads,
                      kDim,  kRatio, kTopk, true, dense_pages(kCap)};
  struct Result {
    std::vector<float> scores;
    std::vector<int32_t> sel, cnt;
  };
  bool synced = true;
  auto run = [&] {
    e.note(cudaMemsetAsync(scores.ptr, 0xFF, scores.bytes(), e.stream));
    indexer_topk(e, rows, a, scores.ptr, sel.ptr, cnt.ptr);
    Result r{std::vector<float>(scores.count), std::vector<int32_t>(sel.count),
             std::vector<int32_t>(cnt.count)};
    e.to_host(r.scores.data(), scores.ptr, scores.bytes());
    e.to_host(r.sel.data(), sel.ptr, sel.bytes());
    e.to_host(r.cnt.data(), cnt.ptr, cnt.bytes());
    synced = e.sync().ok() && synced;
    return r;
  };
  const bool fast0 = fast_kernels(), tc0 = indexer_tc();
  set_fast_kernels(false);  // the reference body
  const Result ref = run();
  set_fast_kernels(true);
  set_indexer_tc(false);  // the CUDA-core kernel
  const double ms_cores =
      time_ms(e, 5, [&] { indexer_topk(e, rows, a, scores.ptr, sel.ptr, cnt.ptr); });
  set_indexer_tc(true);
  const bool used = indexer_tc_supported(a);
  const bool rank0 = topk_rank();
  set_topk_rank(false);  // the radix select, against which the rank counts are compared
  const Result tc = run();
  const double ms_tc =
      time_ms(e, 5, [&] { indexer_topk(e, rows, a, scores.ptr, sel.ptr, cnt.ptr); });
  set_topk_rank(true);  // the rank-counting top-k (decode-sized launches): the same picks
  const Result ranked = run();
  const double ms_rank =
      time_ms(e, 5, [&] { indexer_topk(e, rows, a, scores.ptr, sel.ptr, cnt.ptr); });
  set_topk_rank(rank0);
  set_fast_kernels(fast0);
  set_indexer_tc(tc0);
  // Scores: every visible entry (and the −inf past them).
  std::vector<float> rv, tv;
  int64_t wrong_tail = 0, differ = 0, visible = 0;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t vis = (int64_t{l.pos[static_cast<size_t>(r)]} + 1) / kRatio;
    for (int64_t j = 0; j < kCap; ++j) {
      const float x = ref.scores[static_cast<size_t>(r * kCap + j)];
      const float y = tc.scores[static_cast<size_t>(r * kCap + j)];
      if (j >= vis) {
        wrong_tail += !(y == -INFINITY);
        continue;
      }
      rv.push_back(x);
      tv.push_back(y);
      differ += x != y;
      ++visible;
    }
  }
  const OutputError err = max_rel_error(rv, tv);
  // Top-k: the share of each row's selection the reference also selected.
  double overlap = 0;
  bool counts_equal = true;
  for (int64_t r = 0; r < n; ++r) {
    const int c = ref.cnt[static_cast<size_t>(r)];
    counts_equal = counts_equal && c == tc.cnt[static_cast<size_t>(r)];
    std::unordered_set<int32_t> want(ref.sel.begin() + r * kTopk, ref.sel.begin() + r * kTopk + c);
    int hit = 0;
    for (int i = 0; i < c; ++i) hit += want.count(tc.sel[static_cast<size_t>(r * kTopk + i)]) > 0;
    overlap += c > 0 ? static_cast<double>(hit) / c : 1.0;
  }
  overlap /= static_cast<double>(n);
  const bool ok = used && synced && e.sync().ok() && wrong_tail == 0 && counts_equal;
  KernelCheck ks;
  ks.tolerance = 1e-2;
  ks.rel_error = ok ? err.rel : 1.0;
  char line[320];
  std::snprintf(line, sizeof line,
                "indexer tc %-24s scores: tc %7.3f ms  CUDA cores %7.3f ms  rel.err %.2e (tol "
                "%.0e), %lld of %lld differ%s%s",
                l.name.c_str(), ms_tc, ms_cores, ks.rel_error, ks.tolerance,
                static_cast<long long>(differ), static_cast<long long>(visible),
                used ? "" : " (not supported)",
                wrong_tail ? " (entries past the visible set)" : "");
  ks.line = line;
  out.push_back(ks);
  KernelCheck kt;
  kt.tolerance = 0.02;
  kt.rel_error = ok ? 1.0 - overlap : 1.0;
  std::snprintf(line, sizeof line,
                "indexer tc %-24s top-%d: %.2f %% of the selected ids the reference's%s",
                l.name.c_str(), kTopk, 100.0 * overlap, counts_equal ? "" : " (counts differ)");
  kt.line = line;
  out.push_back(kt);
  KernelCheck kr;
  kr.tolerance = 0;
  kr.rel_error = ok && ranked.sel == tc.sel && ranked.cnt == tc.cnt ? 0.0 : 1.0;
  std::snprintf(line, sizeof line,
                "indexer tc %-24s top-%d by rank counting: %s the radix select's picks, scores + "
                "top-k %7.3f ms (radix %7.3f)",
                l.name.c_str(), kTopk, kr.rel_error == 0 ? "the same as" : "NOT", ms_rank, ms_tc);
  kr.line = line;
  out.push_back(kr);
}

}  // namespace

std::vector<KernelCheck> indexer_tc_kernel_report() {
  std::vector<KernelCheck> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return out;
  Exec e;
  cudaStreamCreate(&e.stream);
  std::mt19937 rng(31);
  CheckLaunch dec1, dec16, chunk;
  dec1.name = "decode 1 row at 4095";
  dec16.name = "decode 16 rows near 4095";
  chunk.name = "512 rows from 7680";
  dec1.add(0, 4095, 1);
  for (int s = 0; s < 16; ++s) dec16.add(s, 4095 - 13 * s, 1);
  chunk.add(0, 7680, 512);
  for (const CheckLaunch* l : {&dec1, &dec16, &chunk}) check_launch(e, rng, *l, out);
  if (e.error != cudaSuccess) {
    KernelCheck kc;
    kc.line = std::string("CUDA error in the indexer checks: ") + cudaGetErrorString(e.error);
    kc.rel_error = 1;
    out.push_back(kc);
  }
  cudaStreamDestroy(e.stream);
  return out;
}

}  // namespace deepinfer::cuda
