// Device self-check and timing of the grouped routed-expert kernels (moe_grouped.cuh) on random
// experts at V4-Flash sizes (256 experts, 2048×4096 w1/w3, 4096×2048 w2) in FP4, FP8 and bf16:
// against the reference body (linear_experts with the fast kernels off), at decode and prefill
// slot counts with skewed routing (one expert takes most slots, half the experts none). Outputs
// are NaN-filled first, so a slot left unwritten fails. Each slot's result is also checked to be
// the same bits when its token runs alone (batch invariance), and the time is reported beside
// the per-slot kernel (gemv_experts) as bandwidth over the distinct experts' bytes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <tuple>

#include "backend/cuda/gemv.cuh"
#include "backend/cuda/kernel_report.h"
#include "backend/cuda/kernel_report_measure.cuh"
#include "backend/cuda/moe_grouped.cuh"
#include "backend/cuda/ops.cuh"

namespace deepinfer::cuda {
namespace {

DI_HD inline uint32_t mix32(uint64_t i, uint32_t seed) {
  uint64_t z = i * 0x9e3779b97f4a7c15ull + seed;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<uint32_t>(z ^ (z >> 31));
}

// E experts [out, in] of one format in one allocation, random codes filled on the device.
struct Experts {
  DeviceArray<uint8_t> data, scale;
  DeviceArray<DevWeight> table;
  int64_t bytes_per_expert = 0;
};

Experts random_experts(Exec& e, DevFormat f, int E, int64_t out, int64_t in, uint32_t seed) {
  Experts x;
  const int64_t n = out * in;
  const int64_t wbytes = f == DevFormat::FP4 ? n / 2 : f == DevFormat::FP8 ? n : 2 * n;
  const int bo = f == DevFormat::FP8 ? 128 : 1, bi = f == DevFormat::FP8 ? 128 : 32;
  const int64_t so = (out + bo - 1) / bo, si = in / bi;
  const int64_t sbytes = f == DevFormat::BF16 ? 0 : so * si;
  x.data.allocate(e, static_cast<size_t>(wbytes * E));
  uint8_t* d = x.data.ptr;
  e.each(wbytes * E, [=] DI_HD(int64_t i) {
    uint8_t b = static_cast<uint8_t>(mix32(static_cast<uint64_t>(i), seed));
    if (f == DevFormat::FP8 && (b & 0x7f) == 0x7f) b ^= 1;  // no NaN codes
    if (f == DevFormat::BF16 && (i & 1)) b = static_cast<uint8_t>(0x3c + (b & 0x3) + (b & 0x80));
    d[i] = b;
  });
  std::vector<DevWeight> t(static_cast<size_t>(E));
  if (sbytes > 0) {
    x.scale.allocate(e, static_cast<size_t>(sbytes * E));
    uint8_t* s = x.scale.ptr;
    e.each(sbytes * E, [=] DI_HD(int64_t i) {
      s[i] = static_cast<uint8_t>(120 + mix32(static_cast<uint64_t>(i), seed + 1) % 8);
    });
  }
  for (int j = 0; j < E; ++j) {
    DevWeight& w = t[static_cast<size_t>(j)];
    w.format = f;
    w.out = out;
    w.in = in;
    w.stride = in;
    w.data = d + j * wbytes;
    if (sbytes > 0) {
      w.scale = x.scale.ptr + j * sbytes;
      w.scale_stride = si;
      w.block_out = bo;
      w.block_in = bi;
    }
  }
  x.table.upload(e, t);
  x.bytes_per_expert = wbytes + sbytes;
  return x;
}

const char* fmt_name(DevFormat f) {
  return f == DevFormat::BF16 ? "bf16" : f == DevFormat::FP8 ? "fp8 " : "fp4 ";
}

// Skewed routing: expert 3 takes about 60% of the slots, the rest fall on experts [0, E/2), so
// half the experts get none.
std::vector<int32_t> skewed_routing(int64_t slots, int E, std::mt19937& rng) {
  std::vector<int32_t> idx(static_cast<size_t>(slots));
  std::uniform_int_distribution<int> pick(0, E / 2 - 1), coin(0, 9);
  for (auto& v : idx) v = coin(rng) < 6 ? 3 : pick(rng);
  return idx;
}

// The three products' reference bodies over the first `checked` slots into r1 / r3 / r2, then
// the outputs under test y1 / y3 / y2 NaN-filled, so a slot a kernel leaves unwritten shows.
struct ExpertRows {
  DeviceArray<float>&y1, &y3, &y2, &r1, &r3, &r2;
};
void reference_experts(Exec& e, const float* x, int64_t checked, int K, const Experts& w1,
                       const Experts& w3, const Experts& w2, const int32_t* idx, DevFormat f,
                       int64_t out, int64_t in, const ExpertRows& rows) {
  set_fast_kernels(false);
  linear_experts(e, x, false, checked, K, w1.table.ptr, idx, rows.r1.ptr, out, out, in, false,
                 false, f, nullptr);
  linear_experts(e, x, false, checked, K, w3.table.ptr, idx, rows.r3.ptr, out, out, in, false,
                 false, f, nullptr);
  linear_experts(e, x, true, checked, K, w2.table.ptr, idx, rows.r2.ptr, in, in, out, false, false,
                 f, nullptr);
  set_fast_kernels(true);
  for (auto* y : {&rows.y1, &rows.y3, &rows.y2})
    cudaMemsetAsync(y->ptr, 0xff, y->bytes(), e.stream);
}

// The three products under test against the reference's first `checked` slots: the largest
// relative error, and the outputs over all slots left NaN or made infinite (−1: a device error).
struct ProductsError {
  double rel = 0;
  int64_t bad = 0;
};
ProductsError compare_products(Exec& e, int64_t checked, int64_t slots, int64_t out, int64_t in,
                               const ExpertRows& rows) {
  ProductsError r;
  for (const auto& [ref, got, w] :
       {std::tuple{&rows.r1, &rows.y1, out}, std::tuple{&rows.r3, &rows.y3, out},
        std::tuple{&rows.r2, &rows.y2, in}}) {
    std::vector<float> a(static_cast<size_t>(checked * w)), b(a.size());
    std::vector<float> all(static_cast<size_t>(slots * w));
    e.to_host(a.data(), ref->ptr, a.size() * 4);
    e.to_host(b.data(), got->ptr, b.size() * 4);
    e.to_host(all.data(), got->ptr, all.size() * 4);
    if (!e.sync().ok()) r.bad = -1;
    r.rel = std::max(r.rel, max_rel_error(a, b).rel);
    for (float v : all) r.bad += std::isfinite(v) ? 0 : 1;
  }
  return r;
}

}  // namespace

std::vector<KernelCheck> expert_kernel_report() {
  std::vector<KernelCheck> report;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return report;
  const bool fast0 = fast_kernels();
  Exec e;
  cudaStreamCreate(&e.stream);
  std::mt19937 rng(11);
  constexpr int E = 256, K = 6;
  constexpr int64_t kOut = 2048, kIn = 4096;  // w1 / w3 (w2 is the transpose shape)
  for (DevFormat f : {DevFormat::FP4, DevFormat::FP8, DevFormat::BF16}) {
    Experts w1 = random_experts(e, f, E, kOut, kIn, 100 + static_cast<uint32_t>(f));
    Experts w3 = random_experts(e, f, E, kOut, kIn, 200 + static_cast<uint32_t>(f));
    Experts w2 = random_experts(e, f, E, kIn, kOut, 300 + static_cast<uint32_t>(f));
    for (int64_t tokens : {1, 16, 64, 512}) {
      const int64_t slots = tokens * K;
      std::vector<int32_t> hidx;
      if (tokens == 1) {
        hidx = {3, 17, 40, 41, 99, 127};
      } else {
        hidx = skewed_routing(slots, E, rng);
      }
      std::vector<float> hx(static_cast<size_t>(slots * kIn));
      std::normal_distribution<float> g(0.0f, 1.0f);
      for (auto& v : hx) v = g(rng);
      DeviceArray<int32_t> idx;
      idx.upload(e, hidx);
      DeviceArray<float> x, y1, y3, r1, r3, y2, r2;
      x.upload(e, hx);  // tokens rows for w1/w3; slots rows (of kOut) for w2
      for (auto* a : {&y1, &y3, &r1, &r3}) a->allocate(e, static_cast<size_t>(slots * kOut));
      for (auto* a : {&y2, &r2}) a->allocate(e, static_cast<size_t>(slots * kIn));
      ExpertPlanBuffers pb;
      pb.allocate(e, slots, E);
      const ExpertPlan plan = pb.plan();
      // reference bodies (slow: the first 384 slots, which still span several chunks of the
      // crowded expert)
      const int64_t checked = std::min<int64_t>(slots, 384);
      // The reference bodies into r1 / r3 / r2, then the outputs under test NaN-filled.
      const auto reference = [&] {
        reference_experts(e, x.ptr, checked, K, w1, w3, w2, idx.ptr, f, kOut, kIn,
                          {y1, y3, y2, r1, r3, r2});
      };
      reference();
      const auto grouped13 = [&] {
        moe_plan(e, idx.ptr, slots, E, plan);
        grouped_experts(e, plan, slots, E, x.ptr, false, K, {w1.table.ptr, y1.ptr},
                        {w3.table.ptr, y3.ptr}, kOut, kOut, kIn, false, f);
      };
      const auto grouped2 = [&] {
        grouped_experts(e, plan, slots, E, x.ptr, true, K, {w2.table.ptr, y2.ptr}, {}, kIn, kIn,
                        kOut, false, f);
      };
      grouped13();
      grouped2();
      std::vector<float> a(static_cast<size_t>(slots * kIn)), b(a.size());
      double num = 0, den = 0;
      int64_t nan = 0;
      const auto compare = [&](const DeviceArray<float>& ref, const DeviceArray<float>& got,
                               size_t n) {
        e.to_host(a.data(), ref.ptr, n * 4);
        e.to_host(b.data(), got.ptr, n * 4);
        if (!e.sync().ok()) {
          nan = -1;
          return;
        }
        for (size_t i = 0; i < n; ++i) {
          if (std::isnan(b[i])) ++nan;
          num = std::max(num, static_cast<double>(std::fabs(a[i] - b[i])));
          den = std::max(den, static_cast<double>(std::fabs(a[i])));
        }
      };
      compare(r1, y1, static_cast<size_t>(checked * kOut));
      compare(r3, y3, static_cast<size_t>(checked * kOut));
      compare(r2, y2, static_cast<size_t>(checked * kIn));
      if (nan == 0) {  // every slot written, also those not checked against the reference
        for (const DeviceArray<float>* y : {&y1, &y3, &y2}) {
          const size_t n =
              y == &y2 ? static_cast<size_t>(slots * kIn) : static_cast<size_t>(slots * kOut);
          e.to_host(b.data(), y->ptr, n * 4);
          if (!e.sync().ok()) nan = -1;
          for (size_t i = 0; i < n && nan >= 0; ++i) nan += std::isnan(b[i]) ? 1 : 0;
        }
      }
      // Batch invariance: token 1's slots run alone give the same bits as inside the batch.
      int64_t differ = 0;
      if (tokens > 1 && nan == 0) {
        std::vector<float> batch(static_cast<size_t>(K * kOut));
        e.to_host(batch.data(), y1.ptr + K * kOut, batch.size() * 4);
        ExpertPlanBuffers pb1;
        pb1.allocate(e, K, E);
        DeviceArray<float> y1s, y3s;
        y1s.allocate(e, static_cast<size_t>(K * kOut));
        y3s.allocate(e, static_cast<size_t>(K * kOut));
        moe_plan(e, idx.ptr + K, K, E, pb1.plan());
        grouped_experts(e, pb1.plan(), K, E, x.ptr + kIn, false, K, {w1.table.ptr, y1s.ptr},
                        {w3.table.ptr, y3s.ptr}, kOut, kOut, kIn, false, f);
        std::vector<float> alone(batch.size());
        e.to_host(alone.data(), y1s.ptr, alone.size() * 4);
        if (e.sync().ok()) {
          for (size_t i = 0; i < alone.size(); ++i)
            differ += std::memcmp(&alone[i], &batch[i], 4) != 0;
        } else {
          differ = -1;
        }
      }
      // Times: grouped (plan + w1/w3 in one launch, then w2) vs the per-slot kernel.
      const int iters = tokens >= 64 ? 5 : 30;
      const float ms_g = time_ms(e, iters, [&] {
        grouped13();
        grouped2();
      });
      const float ms_s = time_ms(e, iters, [&] {
        for (const auto& [w, y, o, in, per] : {std::tuple{w1.table.ptr, y1.ptr, kOut, kIn, false},
                                               std::tuple{w3.table.ptr, y3.ptr, kOut, kIn, false},
                                               std::tuple{w2.table.ptr, y2.ptr, kIn, kOut, true}}) {
          gemv_experts(e, x.ptr, per, slots, K, w, idx.ptr, y, o, o, in, false, f);
        }
      });
      std::vector<int32_t> sorted = hidx;
      std::sort(sorted.begin(), sorted.end());
      const int64_t distinct = std::unique(sorted.begin(), sorted.end()) - sorted.begin();
      const double bytes = 3.0 * static_cast<double>(distinct * w1.bytes_per_expert);
      const double gbs = bytes / (ms_g * 1e-3) / 1e9;
      const double tflops =
          2.0 * 3.0 * static_cast<double>(slots * kOut * kIn) / (ms_g * 1e-3) / 1e12;
      char line[320];
      std::snprintf(line, sizeof line,
                    "%s experts 256x(2048x4096 w1+w3, 4096x2048 w2) tokens=%-4lld slots=%-5lld "
                    "distinct=%-3lld grouped %8.3f ms (%6.1f GB/s, %4.1f%% of 4.8 TB/s, %6.2f "
                    "TFLOP/s) per-slot %8.3f ms  rel.err %.2e  NaN %lld  alone!=batch %lld",
                    fmt_name(f), static_cast<long long>(tokens), static_cast<long long>(slots),
                    static_cast<long long>(distinct), ms_g, gbs, gbs / 48.0, tflops, ms_s,
                    den > 0 ? num / den : 0, static_cast<long long>(nan),
                    static_cast<long long>(differ));
      KernelCheck kc;
      kc.line = line;
      const bool ok = nan == 0 && differ == 0;
      kc.rel_error = ok ? (den > 0 ? num / den : 0) : 1.0;
      kc.tolerance = 1e-4;
      report.push_back(kc);
      if (tokens < 64) continue;
      // The tensor-core kernel on bf16-exact activations (as the official numerics give it):
      // exact products, so within fp32 summation noise of the reference.
      for (auto& v : hx) v = bf16r(v);
      x.upload(e, hx);
      reference();
      const auto tc = [&] {
        moe_plan(e, idx.ptr, slots, E, plan);
        grouped_experts_tc(e, plan, slots, E, x.ptr, false, K, {w1.table.ptr, y1.ptr},
                           {w3.table.ptr, y3.ptr}, kOut, kOut, kIn, false, f);
        grouped_experts_tc(e, plan, slots, E, x.ptr, true, K, {w2.table.ptr, y2.ptr}, {}, kIn, kIn,
                           kOut, false, f);
      };
      tc();
      num = den = 0;
      nan = 0;
      compare(r1, y1, static_cast<size_t>(checked * kOut));
      compare(r3, y3, static_cast<size_t>(checked * kOut));
      compare(r2, y2, static_cast<size_t>(checked * kIn));
      const float ms_tc = time_ms(e, iters, tc);
      const double tc_tflops =
          2.0 * 3.0 * static_cast<double>(slots * kOut * kIn) / (ms_tc * 1e-3) / 1e12;
      std::snprintf(line, sizeof line,
                    "%s experts tensor-core tokens=%-4lld slots=%-5lld %8.3f ms (%6.2f TFLOP/s; "
                    "CUDA-core kernel %8.3f ms)  rel.err %.2e (bf16-exact inputs)  NaN %lld",
                    fmt_name(f), static_cast<long long>(tokens), static_cast<long long>(slots),
                    ms_tc, tc_tflops, ms_g, den > 0 ? num / den : 0, static_cast<long long>(nan));
      KernelCheck tk;
      tk.line = line;
      tk.rel_error = nan == 0 ? (den > 0 ? num / den : 0) : 1.0;
      tk.tolerance = 1e-4;
      report.push_back(tk);
    }
  }
  set_fast_kernels(fast0);
  cudaStreamDestroy(e.stream);
  return report;
}

// The cuBLAS path (grouped_experts_lt) at prefill sizes, skewed routing (128 experts with slots)
// and uniform (all 256): fp32 inputs (hi + lo) and bf16-exact ones (as the official numerics give
// them), against the reference body on the first 384 slots, every slot written, and its time
// beside the tensor-core WMMA kernel's.
std::vector<KernelCheck> expert_lt_kernel_report() {
  std::vector<KernelCheck> report;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return report;
  const bool fast0 = fast_kernels();
  const bool lt0 = experts_lt();
  set_experts_lt(true);  // checked even where the environment turns it off
  Exec e;
  cudaStreamCreate(&e.stream);
  std::mt19937 rng(23);
  constexpr int E = 256, K = 6;
  constexpr int64_t kOut = 2048, kIn = 4096;
  for (DevFormat f : {DevFormat::FP4, DevFormat::FP8, DevFormat::BF16}) {
    Experts w1 = random_experts(e, f, E, kOut, kIn, 400 + static_cast<uint32_t>(f));
    Experts w3 = random_experts(e, f, E, kOut, kIn, 500 + static_cast<uint32_t>(f));
    Experts w2 = random_experts(e, f, E, kIn, kOut, 600 + static_cast<uint32_t>(f));
    for (const auto& [tokens, uniform] :
         {std::pair{int64_t{512}, false}, std::pair{int64_t{2048}, false},
          std::pair{int64_t{8192}, false}, std::pair{int64_t{8192}, true}}) {
      const int64_t slots = tokens * K;
      std::vector<int32_t> hidx = skewed_routing(slots, E, rng);
      if (uniform) {  // every expert about slots / E times
        std::uniform_int_distribution<int> any(0, E - 1);
        for (auto& v : hidx) v = any(rng);
      }
      DeviceArray<int32_t> idx;
      idx.upload(e, hidx);
      DeviceArray<float> x, y1, y3, r1, r3, y2, r2;
      x.allocate(e, static_cast<size_t>(slots * kIn));
      float* xp = x.ptr;
      const uint32_t seed = static_cast<uint32_t>(tokens) + 7u * static_cast<uint32_t>(f);
      e.each(slots * kIn, [=] DI_HD(int64_t i) {
        xp[i] = static_cast<float>(mix32(static_cast<uint64_t>(i), seed) >> 8) * 0x1p-22f - 2.0f;
      });
      for (auto* a : {&y1, &y3, &r1, &r3}) a->allocate(e, static_cast<size_t>(slots * kOut));
      for (auto* a : {&y2, &r2}) a->allocate(e, static_cast<size_t>(slots * kIn));
      ExpertPlanBuffers pb;
      pb.allocate(e, slots, E);
      const ExpertPlan plan = pb.plan();
      const int64_t checked = std::min<int64_t>(slots, 384);
      for (bool exact_in : {false, true}) {
        if (exact_in) e.each(slots * kIn, [=] DI_HD(int64_t i) { xp[i] = bf16r(xp[i]); });
        reference_experts(e, x.ptr, checked, K, w1, w3, w2, idx.ptr, f, kOut, kIn,
                          {y1, y3, y2, r1, r3, r2});
        bool ran = true;
        const auto lt = [&] {
          std::vector<int32_t> offsets;
          moe_plan(e, idx.ptr, slots, E, plan);
          ran = read_plan_offsets(e, plan, E, offsets) &&
                grouped_experts_lt(e, plan, offsets, slots, E, x.ptr, false, K,
                                   {w1.table.ptr, y1.ptr}, {w3.table.ptr, y3.ptr}, kOut, kOut, kIn,
                                   false, f, exact_in) &&
                grouped_experts_lt(e, plan, offsets, slots, E, x.ptr, true, K,
                                   {w2.table.ptr, y2.ptr}, {}, kIn, kIn, kOut, false, f, exact_in);
        };
        lt();
        const auto [rel, bad] =
            compare_products(e, checked, slots, kOut, kIn, {y1, y3, y2, r1, r3, r2});
        const int iters = 3;
        const double flop = 2.0 * 3.0 * static_cast<double>(slots * kOut * kIn);
        const double ms_lt = time_ms(e, iters, lt);
        char line[400];
        int used = std::snprintf(
            line, sizeof line,
            "%s experts cuBLAS tokens=%-4lld slots=%-5lld %s routing, %s inputs: %8.3f ms "
            "(%6.1f TFLOP/s)",
            fmt_name(f), static_cast<long long>(tokens), static_cast<long long>(slots),
            uniform ? "uniform" : "skewed", exact_in ? "bf16-exact" : "fp32 hi+lo", ms_lt,
            flop / (ms_lt * 1e-3) / 1e12);
        if (exact_in) {  // the WMMA kernel on the same launch
          const double ms_tc = time_ms(e, iters, [&] {
            moe_plan(e, idx.ptr, slots, E, plan);
            grouped_experts_tc(e, plan, slots, E, x.ptr, false, K, {w1.table.ptr, y1.ptr},
                               {w3.table.ptr, y3.ptr}, kOut, kOut, kIn, false, f);
            grouped_experts_tc(e, plan, slots, E, x.ptr, true, K, {w2.table.ptr, y2.ptr}, {}, kIn,
                               kIn, kOut, false, f);
          });
          used += std::snprintf(line + used, sizeof line - static_cast<size_t>(used),
                                "; WMMA %8.3f ms (%6.1f)", ms_tc, flop / (ms_tc * 1e-3) / 1e12);
        }
        std::snprintf(line + used, sizeof line - static_cast<size_t>(used),
                      "  rel.err %.2e  non-finite %lld%s", rel, static_cast<long long>(bad),
                      ran ? "" : "  NOT RUN");
        KernelCheck kc;
        kc.line = line;
        kc.rel_error = ran && bad == 0 ? rel : 1.0;
        kc.tolerance = 1e-4;
        report.push_back(kc);
      }
    }
  }
  set_fast_kernels(fast0);
  set_experts_lt(lt0);
  cudaStreamDestroy(e.stream);
  return report;
}

// The decode-sized tensor-core kernel (grouped_experts_dec) at 1 / 16 / 64 / 256 tokens, skewed
// and uniform-random routing (what decode on random weights looks like), on bf16-exact inputs (as
// the official numerics give them): ≤ 1e-4 relative to the reference body, every slot written,
// token 1's slots alone the same bits as inside the batch (all three products), and its
// bandwidth over the distinct experts' bytes beside the CUDA-core kernel's.
std::vector<KernelCheck> expert_dec_kernel_report() {
  std::vector<KernelCheck> report;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return report;
  const bool fast0 = fast_kernels();
  Exec e;
  cudaStreamCreate(&e.stream);
  std::mt19937 rng(31);
  constexpr int E = 256, K = 6;
  constexpr int64_t kOut = 2048, kIn = 4096;
  for (DevFormat f : {DevFormat::FP4, DevFormat::FP8, DevFormat::BF16}) {
    Experts w1 = random_experts(e, f, E, kOut, kIn, 700 + static_cast<uint32_t>(f));
    Experts w3 = random_experts(e, f, E, kOut, kIn, 800 + static_cast<uint32_t>(f));
    Experts w2 = random_experts(e, f, E, kIn, kOut, 900 + static_cast<uint32_t>(f));
    for (const auto& [tokens, uniform] :
         {std::pair{int64_t{1}, true}, std::pair{int64_t{16}, false}, std::pair{int64_t{16}, true},
          std::pair{int64_t{64}, false}, std::pair{int64_t{64}, true},
          std::pair{int64_t{256}, false}, std::pair{int64_t{256}, true}}) {
      const int64_t slots = tokens * K;
      std::vector<int32_t> hidx = skewed_routing(slots, E, rng);
      if (uniform) {
        std::uniform_int_distribution<int> any(0, E - 1);
        for (auto& v : hidx) v = any(rng);
      }
      if (tokens == 1) hidx = {3, 17, 40, 41, 99, 127};
      std::vector<float> hx(static_cast<size_t>(slots * kIn));
      std::normal_distribution<float> gauss(0.0f, 1.0f);
      for (auto& v : hx) v = bf16r(gauss(rng));
      DeviceArray<int32_t> idx;
      idx.upload(e, hidx);
      DeviceArray<float> x, y1, y3, r1, r3, y2, r2;
      x.upload(e, hx);  // tokens rows for w1/w3; slots rows (of kOut) for w2
      for (auto* a : {&y1, &y3, &r1, &r3}) a->allocate(e, static_cast<size_t>(slots * kOut));
      for (auto* a : {&y2, &r2}) a->allocate(e, static_cast<size_t>(slots * kIn));
      ExpertPlanBuffers pb;
      pb.allocate(e, slots, E);
      const ExpertPlan plan = pb.plan();
      const int64_t checked = std::min<int64_t>(slots, 384);
      reference_experts(e, x.ptr, checked, K, w1, w3, w2, idx.ptr, f, kOut, kIn,
                        {y1, y3, y2, r1, r3, r2});
      const auto dec = [&] {
        moe_plan(e, idx.ptr, slots, E, plan);
        grouped_experts_dec(e, plan, slots, E, x.ptr, false, K, {w1.table.ptr, y1.ptr},
                            {w3.table.ptr, y3.ptr}, kOut, kOut, kIn, false, f);
        grouped_experts_dec(e, plan, slots, E, x.ptr, true, K, {w2.table.ptr, y2.ptr}, {}, kIn, kIn,
                            kOut, false, f);
      };
      dec();
      const auto [rel, bad] =
          compare_products(e, checked, slots, kOut, kIn, {y1, y3, y2, r1, r3, r2});
      // Batch invariance: token 1's slots alone (w1 / w3 on its row, w2 on its slots' rows).
      int64_t differ = 0;
      if (tokens > 1 && bad == 0) {
        ExpertPlanBuffers pb1;
        pb1.allocate(e, K, E);
        DeviceArray<float> y1s, y3s, y2s;
        y1s.allocate(e, static_cast<size_t>(K * kOut));
        y3s.allocate(e, static_cast<size_t>(K * kOut));
        y2s.allocate(e, static_cast<size_t>(K * kIn));
        moe_plan(e, idx.ptr + K, K, E, pb1.plan());
        grouped_experts_dec(e, pb1.plan(), K, E, x.ptr + kIn, false, K, {w1.table.ptr, y1s.ptr},
                            {w3.table.ptr, y3s.ptr}, kOut, kOut, kIn, false, f);
        grouped_experts_dec(e, pb1.plan(), K, E, x.ptr + K * kOut, true, K, {w2.table.ptr, y2s.ptr},
                            {}, kIn, kIn, kOut, false, f);
        for (const auto& [alone, batch, w] :
             {std::tuple{&y1s, &y1, kOut}, std::tuple{&y3s, &y3, kOut},
              std::tuple{&y2s, &y2, kIn}}) {
          std::vector<float> u(static_cast<size_t>(K * w)), v(u.size());
          e.to_host(u.data(), alone->ptr, u.size() * 4);
          e.to_host(v.data(), batch->ptr + K * w, v.size() * 4);
          if (!e.sync().ok()) {
            differ = -1;
            break;
          }
          for (size_t i = 0; i < u.size(); ++i) differ += std::memcmp(&u[i], &v[i], 4) != 0;
        }
      }
      const int iters = tokens >= 64 ? 10 : 30;
      const float ms_dec = time_ms(e, iters, dec);
      const float ms_cc = time_ms(e, iters, [&] {
        moe_plan(e, idx.ptr, slots, E, plan);
        grouped_experts(e, plan, slots, E, x.ptr, false, K, {w1.table.ptr, y1.ptr},
                        {w3.table.ptr, y3.ptr}, kOut, kOut, kIn, false, f);
        grouped_experts(e, plan, slots, E, x.ptr, true, K, {w2.table.ptr, y2.ptr}, {}, kIn, kIn,
                        kOut, false, f);
      });
      std::vector<int32_t> sorted = hidx;
      std::sort(sorted.begin(), sorted.end());
      const int64_t distinct = std::unique(sorted.begin(), sorted.end()) - sorted.begin();
      const double bytes = 3.0 * static_cast<double>(distinct * w1.bytes_per_expert);
      const double gb_dec = bytes / (ms_dec * 1e-3) / 1e9, gb_cc = bytes / (ms_cc * 1e-3) / 1e9;
      char line[360];
      std::snprintf(line, sizeof line,
                    "%s experts decode mma tokens=%-4lld %s distinct=%-3lld %7.3f ms (%6.1f GB/s, "
                    "%4.1f%% of 4.8 TB/s) CUDA-core %7.3f ms (%6.1f GB/s, %4.1f%%)  rel.err %.2e "
                    " NaN %lld  alone!=batch %lld",
                    fmt_name(f), static_cast<long long>(tokens), uniform ? "uniform" : "skewed ",
                    static_cast<long long>(distinct), ms_dec, gb_dec, gb_dec / 48.0, ms_cc, gb_cc,
                    gb_cc / 48.0, rel, static_cast<long long>(bad), static_cast<long long>(differ));
      KernelCheck kc;
      kc.line = line;
      kc.rel_error = bad == 0 && differ == 0 ? rel : 1.0;
      kc.tolerance = 1e-4;
      report.push_back(kc);
    }
  }
  set_fast_kernels(fast0);
  cudaStreamDestroy(e.stream);
  return report;
}

// The FP4 decode mma kernel's launch shapes (ExpertDecShape) at decode slot counts below E / 2
// (1, 4, 16, 21 tokens, uniform routing), bf16-exact inputs: every shape's outputs the same bits
// as shape {2, 2, 0, 8} (the one from E / 2 slots), and each one's time (plan + w1/w3 + w2)
// beside the CUDA-core kernel's.
std::vector<KernelCheck> expert_dec_shape_report() {
  std::vector<KernelCheck> report;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return report;
  Exec e;
  cudaStreamCreate(&e.stream);
  std::mt19937 rng(37);
  constexpr int E = 256, K = 6;
  constexpr int64_t kOut = 2048, kIn = 4096;
  const ExpertDecShape base{2, 2, 0, 8};
  const ExpertDecShape shapes[] = {{1, 2, 4, 2}, {1, 4, 4, 2}, {1, 8, 4, 2}, {1, 4, 8, 2},
                                   {1, 4, 2, 2}, {1, 4, 4, 1}, {1, 4, 4, 8}, {2, 4, 4, 2}};
  for (DevFormat f : {DevFormat::FP4}) {
    Experts w1 = random_experts(e, f, E, kOut, kIn, 1000 + static_cast<uint32_t>(f));
    Experts w3 = random_experts(e, f, E, kOut, kIn, 1100 + static_cast<uint32_t>(f));
    Experts w2 = random_experts(e, f, E, kIn, kOut, 1200 + static_cast<uint32_t>(f));
    for (int64_t tokens : {1, 4, 16, 21}) {
      const int64_t slots = tokens * K;
      std::vector<int32_t> hidx(static_cast<size_t>(slots));
      std::uniform_int_distribution<int> any(0, E - 1);
      for (auto& v : hidx) v = any(rng);
      if (tokens == 1) hidx = {3, 17, 40, 41, 99, 127};
      std::vector<float> hx(static_cast<size_t>(slots * kIn));
      std::normal_distribution<float> gauss(0.0f, 1.0f);
      for (auto& v : hx) v = bf16r(gauss(rng));
      DeviceArray<int32_t> idx;
      idx.upload(e, hidx);
      DeviceArray<float> x, y1, y3, y2;
      x.upload(e, hx);
      for (auto* a : {&y1, &y3}) a->allocate(e, static_cast<size_t>(slots * kOut));
      y2.allocate(e, static_cast<size_t>(slots * kIn));
      ExpertPlanBuffers pb;
      pb.allocate(e, slots, E);
      const ExpertPlan plan = pb.plan();
      const auto dec = [&] {
        moe_plan(e, idx.ptr, slots, E, plan);
        grouped_experts_dec(e, plan, slots, E, x.ptr, false, K, {w1.table.ptr, y1.ptr},
                            {w3.table.ptr, y3.ptr}, kOut, kOut, kIn, false, f);
        grouped_experts_dec(e, plan, slots, E, x.ptr, true, K, {w2.table.ptr, y2.ptr}, {}, kIn, kIn,
                            kOut, false, f);
      };
      const auto outputs = [&] {
        std::vector<float> all(static_cast<size_t>(slots * (2 * kOut + kIn)));
        e.to_host(all.data(), y1.ptr, static_cast<size_t>(slots * kOut) * 4);
        e.to_host(all.data() + slots * kOut, y3.ptr, static_cast<size_t>(slots * kOut) * 4);
        e.to_host(all.data() + 2 * slots * kOut, y2.ptr, static_cast<size_t>(slots * kIn) * 4);
        if (!e.sync().ok()) all.assign(all.size(), std::nanf(""));
        return all;
      };
      const auto fill_nan = [&] {
        for (auto* y : {&y1, &y3, &y2}) cudaMemsetAsync(y->ptr, 0xff, y->bytes(), e.stream);
      };
      const int iters = 30;
      set_experts_dec_shape(base);
      fill_nan();
      dec();
      const std::vector<float> want = outputs();
      int64_t bad = 0;
      for (float v : want) bad += std::isfinite(v) ? 0 : 1;
      const float ms_base = time_ms(e, iters, dec);
      const float ms_cc = time_ms(e, iters, [&] {
        moe_plan(e, idx.ptr, slots, E, plan);
        grouped_experts(e, plan, slots, E, x.ptr, false, K, {w1.table.ptr, y1.ptr},
                        {w3.table.ptr, y3.ptr}, kOut, kOut, kIn, false, f);
        grouped_experts(e, plan, slots, E, x.ptr, true, K, {w2.table.ptr, y2.ptr}, {}, kIn, kIn,
                        kOut, false, f);
      });
      std::vector<int32_t> sorted = hidx;
      std::sort(sorted.begin(), sorted.end());
      const int64_t distinct = std::unique(sorted.begin(), sorted.end()) - sorted.begin();
      const double bytes = 3.0 * static_cast<double>(distinct * w1.bytes_per_expert);
      const auto gbs = [&](double ms) { return bytes / (ms * 1e-3) / 1e9; };
      const ExpertDecShape def = experts_dec_shape(slots, E, f);
      for (const ExpertDecShape& sh : shapes) {
        set_experts_dec_shape(sh);
        fill_nan();
        dec();
        const std::vector<float> got = outputs();
        int64_t differ = 0;
        for (size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &want[i], 4) != 0;
        const float ms = time_ms(e, iters, dec);
        char line[360];
        std::snprintf(line, sizeof line,
                      "%s experts decode mma shape T=%d D=%d W=%d P=%d%s tokens=%-3lld "
                      "distinct=%-3lld %7.3f ms (%6.1f GB/s, %4.1f%% of 4.8 TB/s); shape 2,2,0,8 "
                      "%7.3f ms (%6.1f GB/s); CUDA-core %7.3f ms (%6.1f GB/s)  bits differ %lld  "
                      "non-finite %lld",
                      fmt_name(f), sh.tiles, sh.depth, sh.warps, sh.pass,
                      sh.tiles == def.tiles && sh.depth == def.depth && sh.warps == def.warps &&
                              sh.pass == def.pass
                          ? " (default)"
                          : "",
                      static_cast<long long>(tokens), static_cast<long long>(distinct), ms, gbs(ms),
                      gbs(ms) / 48.0, ms_base, gbs(ms_base), ms_cc, gbs(ms_cc),
                      static_cast<long long>(differ), static_cast<long long>(bad));
        KernelCheck kc;
        kc.line = line;
        kc.rel_error = differ == 0 && bad == 0 ? 0.0 : 1.0;
        kc.tolerance = 0;
        report.push_back(kc);
      }
      set_experts_dec_shape({});
    }
  }
  cudaStreamDestroy(e.stream);
  return report;
}

}  // namespace deepinfer::cuda
