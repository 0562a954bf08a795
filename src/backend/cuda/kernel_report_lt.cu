// The cuBLASLt products on the V4-Flash slice's projection shapes: against the reference bodies,
// their TFLOP/s against the H200's dense tensor-core peaks, and the batch-invariant mode's
// row-for-row equality across row counts.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "backend/cuda/cuda_model.h"
#include "backend/cuda/gemm_lt.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/kernel_report.h"
#include "backend/cuda/kernel_report_matrix.cuh"
#include "backend/cuda/ops.cuh"

namespace deepinfer::cuda {
namespace {

constexpr double kPeakBf16 = 989.0, kPeakFp8 = 1979.0;  // TFLOP/s, dense

struct Shape {
  const char* name;
  int64_t out, in;
};

// The slice's dense projections (hidden 4096, q rank 1024, 64 heads × 512, 8 output groups of
// rank 1024, shared expert 2048, indexer 64 × 128).
constexpr Shape kShapes[] = {{"wq_a", 1024, 4096},         {"wq_b", 32768, 1024},
                             {"wkv", 512, 4096},           {"wo_b", 4096, 8192},
                             {"shared w1/w3", 2048, 4096}, {"shared w2", 4096, 2048},
                             {"indexer wq_b", 8192, 1024}};

std::vector<float> random_rows(int64_t n, int64_t in, std::mt19937& rng) {
  std::vector<float> h(static_cast<size_t>(n * in));
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (auto& v : h) v = g(rng);
  return h;
}

std::vector<float> fetch(Exec& e, const float* p, size_t count) {
  std::vector<float> h(count);
  e.to_host(h.data(), p, count * sizeof(float));
  return e.sync().ok() ? h : std::vector<float>{};
}

}  // namespace

std::vector<KernelCheck> lt_kernel_report() {
  std::vector<KernelCheck> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return out;
  Exec e;
  cudaStreamCreate(&e.stream);
  std::mt19937 rng(11);
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  int declined = 0, products = 0;
  for (DevFormat f : {DevFormat::FP8, DevFormat::BF16}) {
    const bool official = f == DevFormat::FP8;  // FP8: quantized inputs, bf16 outputs
    for (const Shape& sh : kShapes) {
      Matrix m = random_matrix(e, f, sh.out, sh.in, rng);
      for (int64_t n : {512, 8192}) {
        DeviceArray<float> x, y, y_ref, xq;
        x.upload(e, random_rows(n, sh.in, rng));
        y.allocate(e, static_cast<size_t>(n * sh.out));
        const int64_t check_rows = 64, check_cols = std::min<int64_t>(sh.out, 2048);
        y_ref.allocate(e, static_cast<size_t>(check_rows * check_cols));
        xq.allocate(e, static_cast<size_t>(check_rows * sh.in));
        const bool took = lt_linear(e, x.ptr, sh.in, n, m.w, y.ptr, sh.out, official);
        set_fast_kernels(false);
        linear(e, x.ptr, sh.in, check_rows, m.w.rows(0, check_cols), y_ref.ptr, check_cols,
               official, xq.ptr);
        set_fast_kernels(true);
        const auto a = fetch(e, y_ref.ptr, static_cast<size_t>(check_rows * check_cols));
        const auto b = fetch(e, y.ptr, static_cast<size_t>(n * sh.out));
        double num = 0, den = 0;
        for (int64_t r = 0; took && !a.empty() && !b.empty() && r < check_rows; ++r) {
          for (int64_t o = 0; o < check_cols; ++o) {
            const float ref = a[static_cast<size_t>(r * check_cols + o)];
            const float got = b[static_cast<size_t>(r * sh.out + o)];
            num = std::max(num, static_cast<double>(std::fabs(ref - got)));
            den = std::max(den, static_cast<double>(std::fabs(ref)));
          }
        }
        float ms = 0;
        if (took) {
          const int iters = n >= 8192 ? 5 : 20;
          cudaEventRecord(t0, e.stream);
          for (int it = 0; it < iters; ++it)
            lt_linear(e, x.ptr, sh.in, n, m.w, y.ptr, sh.out, official);
          cudaEventRecord(t1, e.stream);
          cudaEventSynchronize(t1);
          cudaEventElapsedTime(&ms, t0, t1);
          ms /= static_cast<float>(iters);
        }
        const double tflops =
            ms > 0 ? 2.0 * static_cast<double>(n) * sh.out * sh.in / (ms * 1e-3) / 1e12 : 0.0;
        const double peak = f == DevFormat::FP8 ? kPeakFp8 : kPeakBf16;
        char line[256];
        std::snprintf(line, sizeof line,
                      "lt %-4s %-13s %5lldx%-5lld M=%-5lld %s %8.3f ms %7.1f TFLOP/s (%4.1f%% of "
                      "%.0f)  rel.err %.2e",
                      f == DevFormat::FP8 ? "fp8" : "bf16", sh.name, static_cast<long long>(sh.out),
                      static_cast<long long>(sh.in), static_cast<long long>(n),
                      took ? "" : "DECLINED", ms, tflops, 100.0 * tflops / peak, peak,
                      den > 0 ? num / den : 0.0);
        KernelCheck kc;
        kc.line = line;
        kc.rel_error = took ? (den > 0 ? num / den : 1.0) : 0.0;  // declined: the older kernels
        kc.tolerance = official ? 1e-2 : 1e-4;
        out.push_back(kc);
        declined += took ? 0 : 1;
        ++products;
      }
    }
  }
  {  // the FP8 check drops an algorithm that gives wrong results (4096×2048 on the H200)
    KernelCheck kc;
    kc.line = "cuBLASLt declined " + std::to_string(declined) + " of " + std::to_string(products) +
              " products (at most 2 allowed)";
    kc.rel_error = static_cast<double>(declined);
    kc.tolerance = 2;
    out.push_back(kc);
  }
  // Batch-invariant mode: row 5's output computed inside 70 rows, alone, and inside 3 and 512
  // rows must be the same bits (the default mode is printed for comparison, not checked).
  const bool invariant0 = batch_invariant();
  for (DevFormat f : {DevFormat::FP8, DevFormat::BF16}) {
    const bool official = f == DevFormat::FP8;
    const int64_t o_n = 2048, in = 4096;
    Matrix m = random_matrix(e, f, o_n, in, rng);
    DeviceArray<float> x, y, xq;
    x.upload(e, random_rows(512 + 5, in, rng));
    y.allocate(e, static_cast<size_t>(512 * o_n));
    xq.allocate(e, static_cast<size_t>(512 * in));
    for (bool inv : {false, true}) {
      set_batch_invariant(inv);
      std::vector<float> first;
      int differ = 0;
      for (int64_t n : {70, 1, 3, 512}) {
        const float* xs =
            x.ptr + (n == 70 ? 0 : 5 * in);  // row 5 of the 70 is the first of the rest
        linear(e, xs, in, n, m.w, y.ptr, o_n, official, xq.ptr);
        const auto h = fetch(e, y.ptr + (n == 70 ? 5 * o_n : 0), static_cast<size_t>(o_n));
        if (h.empty()) {
          differ = -1;
          break;
        }
        if (first.empty()) {
          first = h;
        } else {
          differ += std::memcmp(first.data(), h.data(), h.size() * sizeof(float)) != 0;
        }
      }
      char line[200];
      std::snprintf(line, sizeof line,
                    "%s %-4s 2048x4096: a row alone, in 3, 512 rows vs in 70: %d of 3 differ",
                    inv ? "batch-invariant" : "default        ",
                    f == DevFormat::FP8 ? "fp8" : "bf16", differ);
      KernelCheck kc;
      kc.line = line;
      kc.rel_error = differ < 0 ? 1.0 : (inv ? differ : 0.0);
      kc.tolerance = 0;
      out.push_back(kc);
    }
  }
  set_batch_invariant(invariant0);
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  e.blas.reset();
  cudaStreamDestroy(e.stream);
  return out;
}

}  // namespace deepinfer::cuda
