// Device check of the tensor-core prefill attention (attention_tc.cuh) against the reference body
// on random inputs at V4-Flash sizes (64 heads × 512 dims, window 128, top-512 CSA and HCA):
// a 512-row chunk from position 0, one continuing at 7,680 (its window partly in the ring, 1,920
// visible CSA entries), a launch of two segments, and decode-sized launches (1, 4, 16 and 64
// sequences of one row each near 4,096 positions, the threshold lowered for them); Exact and
// official. The output is filled with NaN before each checked run, so unwritten values are caught;
// the decode variants, forced at every row count, must give the prefill kernels' bits. The times
// of both and of the per-(row, head) kernel they replace are printed beside it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "backend/cuda/attention_tc.cuh"
#include "backend/cuda/fast_ops.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/kernel_report.h"
#include "backend/cuda/kernel_report_launch.cuh"
#include "backend/cuda/kernel_report_measure.cuh"
#include "backend/cuda/ops.cuh"

namespace deepinfer::cuda {
namespace {

void check_launch(Exec& e, std::mt19937& rng, const CheckLaunch& l, int ratio, bool official,
                  std::vector<KernelCheck>& out) {
  constexpr int H = 64, D = 512, W = 128, topk = 512;
  constexpr int64_t max_context = 8192;
  const int slots = l.slots();
  const bool csa = ratio == 4;
  const int64_t cap = max_context / ratio, n = l.n();
  DeviceArray<int32_t> dm, sel, cnt;
  const Rows rows = l.upload(e, dm);
  // The indexer's selection: the first min(visible, topk) of a random order of the visible ones.
  std::vector<int32_t> hcnt(static_cast<size_t>(n)), hsel(static_cast<size_t>(n * topk), 0);
  for (int64_t r = 0; r < n; ++r) {
    const int vis = (l.pos[static_cast<size_t>(r)] + 1) / ratio;
    std::vector<int32_t> ids(static_cast<size_t>(vis));
    for (int i = 0; i < vis; ++i) ids[static_cast<size_t>(i)] = i;
    std::shuffle(ids.begin(), ids.end(), rng);
    hcnt[static_cast<size_t>(r)] = std::min(vis, topk);
    std::copy_n(ids.begin(), hcnt[static_cast<size_t>(r)], hsel.begin() + r * topk);
  }
  cnt.upload(e, hcnt);
  sel.upload(e, hsel);
  // Official keys are bf16-exact, as the model leaves them (KV QAT); q is read as bf16 anyway.
  DeviceArray<float> q, kv, ring, cmp, sink, probs, o;
  q.upload(e, normal_values(rng, static_cast<size_t>(n * H * D), 1.0f, false));
  kv.upload(e, normal_values(rng, static_cast<size_t>(n * D), 1.0f, official));
  ring.upload(e, normal_values(rng, static_cast<size_t>(slots * W * D), 1.0f, official));
  cmp.upload(e, normal_values(rng, static_cast<size_t>(slots * cap * D), 1.0f, official));
  sink.upload(e, normal_values(rng, H, 1.0f, false));
  AttnArgs a;
  a.q = q.ptr, a.kv = kv.ptr, a.ring = ring.ptr, a.cmp = cmp.ptr;
  a.sel = sel.ptr, a.cnt = cnt.ptr, a.sink = sink.ptr;
  a.capacity = cap, a.H = H, a.D = D, a.W = W, a.ratio = ratio, a.topk = topk, a.csa = csa;
  a.pages = dense_pages(cap);  // the slots one after another
  a.official = official;
  a.scale = 1.0f / std::sqrt(static_cast<float>(D));
  probs.allocate(e, static_cast<size_t>(n * H * (W + a.cslots())));
  o.allocate(e, static_cast<size_t>(n * H * D));
  auto result = [&] {
    std::vector<float> h(o.count);
    e.to_host(h.data(), o.ptr, o.bytes());
    return h;
  };
  const bool fast0 = fast_kernels(), tc0 = attention_tc(), dec0 = attention_tc_decode();
  const int dec_rows0 = attention_tc_decode_rows();
  const bool softmax0 = attention_tc_decode_softmax();
  const int heads0 = attention_tc_decode_heads();
  set_fast_kernels(false);  // the reference body
  e.note(cudaMemsetAsync(o.ptr, 0xFF, o.bytes(), e.stream));
  attention(e, rows, a, probs.ptr, o.ptr);
  const std::vector<float> ref = result();
  const double ms_ref = time_ms(e, 1, [&] { attention(e, rows, a, probs.ptr, o.ptr); });
  set_fast_kernels(true);
  set_attention_tc(false);  // the per-(row, head) kernel
  const double ms_old = time_ms(e, 3, [&] { attention(e, rows, a, probs.ptr, o.ptr); });
  set_attention_tc(true);
  const int min_rows0 = attention_tc_min_rows();
  set_attention_tc_min_rows(1);  // decode-sized launches too
  // Four configurations: as the forward runs (checked against the reference), the prefill
  // kernels at every row count and the decode variants with their register softmax at every row
  // count, 64 and 16 heads a block (compared bitwise).
  auto run = [&](bool decode, int decode_rows, bool softmax, int heads, double& ms) {
    set_attention_tc_decode(decode);
    set_attention_tc_decode_softmax(softmax);
    set_attention_tc_decode_heads(heads);
    set_attention_tc_decode_rows(decode_rows);
    e.note(cudaMemsetAsync(o.ptr, 0xFF, o.bytes(), e.stream));
    attention(e, rows, a, probs.ptr, o.ptr);
    std::vector<float> h = result();
    ms = time_ms(e, 20, [&] { attention(e, rows, a, probs.ptr, o.ptr); });
    return h;
  };
  double ms_tc = 0, ms_prefill = 0, ms_decode = 0, ms_heads16 = 0;
  constexpr int kEveryRow = 1 << 30;
  const std::vector<float> tc = run(dec0, dec_rows0, softmax0, heads0, ms_tc);
  const std::vector<float> prefill_kernels = run(false, 0, false, 64, ms_prefill);
  const std::vector<float> decode_kernels = run(true, kEveryRow, true, 64, ms_decode);
  const std::vector<float> heads16_kernels = run(true, kEveryRow, true, 16, ms_heads16);
  // Official: the decode P·V with the output's inverse RoPE inside (AttnArgs::out_pairs) against
  // the prefill kernels' output through rope_round_bf16, which it replaces.
  std::vector<float> rope_expected, rope_fused;
  bool rope_said = false;
  if (official) {
    constexpr int kPairs = 32;
    constexpr float kFactor = 1.25f;
    std::vector<float> hinv(kPairs);
    for (int i = 0; i < kPairs; ++i)
      hinv[static_cast<size_t>(i)] = std::pow(10000.0f, -static_cast<float>(i) / kPairs);
    DeviceArray<float> inv;
    inv.upload(e, hinv);
    e.to_device(o.ptr, prefill_kernels.data(), o.bytes());
    rope_round_bf16(e, o.ptr, n, H, D, kPairs, inv.ptr, kFactor, rows.pos, true);
    rope_expected = result();
    a.out_inv_freq = inv.ptr, a.out_factor = kFactor, a.out_pairs = kPairs;
    e.note(cudaMemsetAsync(o.ptr, 0xFF, o.bytes(), e.stream));
    rope_said = attention(e, rows, a, probs.ptr, o.ptr);
    rope_fused = result();
    a.out_inv_freq = nullptr, a.out_factor = 1.0f, a.out_pairs = 0;
  }
  set_attention_tc_decode_heads(heads0);
  set_attention_tc_decode_softmax(softmax0);
  const bool used = attention_tc_supported(a, n);
  set_attention_tc_decode(dec0);
  set_attention_tc_decode_rows(dec_rows0);
  set_attention_tc_min_rows(min_rows0);
  set_fast_kernels(fast0);
  set_attention_tc(tc0);
  const OutputError err = max_rel_error(ref, tc);
  KernelCheck kc;
  kc.tolerance = official ? 1e-2 : 1e-4;  // official outputs are bf16: a few ulps of 2^-8
  kc.rel_error = e.sync().ok() ? err.rel : 1.0;
  if (!used) kc.rel_error = 1.0;
  char line[400];
  std::snprintf(line, sizeof line,
                "attention tc %-26s %s %-8s tc %7.3f ms (prefill kernels %7.3f, decode kernels "
                "%7.3f, 16 heads a block %7.3f)  per-(row, head) %7.3f ms  "
                "reference %8.2f ms  rel.err %.2e (tol %.0e)%s%s",
                l.name.c_str(), csa ? "CSA" : "HCA", official ? "official" : "exact", ms_tc,
                ms_prefill, ms_decode, ms_heads16, ms_old, ms_ref, kc.rel_error, kc.tolerance,
                err.non_finite ? " (non-finite values)" : "", used ? "" : " (not supported)");
  kc.line = line;
  out.push_back(kc);
  // The decode variants must give the prefill kernels' bits (batch invariance: which one a row
  // takes depends on the launch's row count), at 64 and at 16 heads a block.
  const auto bitwise = [&](const std::vector<float>& got, const char* what) {
    int64_t differ = 0;
    for (size_t i = 0; i < prefill_kernels.size(); ++i) {
      differ += std::memcmp(&prefill_kernels[i], &got[i], sizeof(float)) != 0;
    }
    KernelCheck bits;
    bits.tolerance = 0;
    bits.rel_error = differ == 0 && used ? 0.0 : 1.0;
    char text[400];
    std::snprintf(text, sizeof text,
                  "attention tc %-26s %s %-8s %s vs prefill kernels: %lld of %zu values differ in "
                  "bits",
                  l.name.c_str(), csa ? "CSA" : "HCA", official ? "official" : "exact", what,
                  static_cast<long long>(differ), prefill_kernels.size());
    bits.line = text;
    out.push_back(bits);
  };
  bitwise(decode_kernels, "decode kernels");
  bitwise(heads16_kernels, "decode kernels at 16 heads a block");
  if (official) {
    int64_t differ = 0;
    for (size_t i = 0; i < rope_expected.size(); ++i)
      differ += std::memcmp(&rope_expected[i], &rope_fused[i], sizeof(float)) != 0;
    KernelCheck bits;
    bits.tolerance = 0;
    bits.rel_error = differ == 0 && rope_said && used ? 0.0 : 1.0;
    char text[400];
    std::snprintf(text, sizeof text,
                  "attention tc %-26s %s %-8s decode P.V with the inverse RoPE vs prefill "
                  "kernels + rope_round_bf16: %lld of %zu values differ in bits%s",
                  l.name.c_str(), csa ? "CSA" : "HCA", "official", static_cast<long long>(differ),
                  rope_expected.size(), rope_said ? "" : " (not applied)");
    bits.line = text;
    out.push_back(bits);
  }
}

}  // namespace

std::vector<KernelCheck> attention_tc_kernel_report() {
  std::vector<KernelCheck> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return out;
  Exec e;
  cudaStreamCreate(&e.stream);
  std::mt19937 rng(23);
  CheckLaunch first, last, two, dec1, dec4, dec16, dec64;
  first.name = "512 rows from 0";
  last.name = "512 rows from 7680";
  two.name = "2 x 256 rows (0, 300)";
  dec1.name = "decode 1 row at 4095";
  dec4.name = "decode 4 rows at 4095";
  dec16.name = "decode 16 rows at 4095";
  dec64.name = "decode 64 rows at 4095";
  first.add(0, 0, 512);
  last.add(1, 7680, 512);
  two.add(0, 0, 256);
  two.add(2, 300, 256);
  dec1.add(0, 4095, 1);
  for (int s = 0; s < 4; ++s) dec4.add(s, 4095 - 7 * s, 1);
  for (int s = 0; s < 16; ++s) dec16.add(s, 4095 - 7 * s, 1);
  for (int s = 0; s < 64; ++s) dec64.add(s, 4095 - 7 * s, 1);
  for (const CheckLaunch* l : {&first, &last, &two, &dec1, &dec4, &dec16, &dec64}) {
    for (int ratio : {4, 128}) {
      for (bool official : {true, false}) check_launch(e, rng, *l, ratio, official, out);
    }
  }
  if (e.error != cudaSuccess) {
    KernelCheck kc;
    kc.line = std::string("CUDA error in the attention checks: ") + cudaGetErrorString(e.error);
    kc.rel_error = 1;
    out.push_back(kc);
  }
  cudaStreamDestroy(e.stream);
  return out;
}

}  // namespace deepinfer::cuda
