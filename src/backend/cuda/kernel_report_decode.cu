// Device check of the dense products at decode batch sizes (16, 64, 256 rows) through linear(),
// both sides of the GEMV crossover: as GEMV passes of 8 rows (gemv_max_rows raised past the batch)
// and as the default path past them (cuBLASLt FP8 / bf16, the narrow cluster kernel), each
// against the reference body, with its time, GB/s of weights and inputs, and share of 4.8 TB/s.
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/gemm_narrow.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/kernel_report.h"
#include "backend/cuda/kernel_report_matrix.cuh"
#include "backend/cuda/kernel_report_measure.cuh"
#include "backend/cuda/ops.cuh"

namespace deepinfer::cuda {
namespace {

constexpr double kHbmGbs = 4800.0;

struct Case {
  const char* name;
  DevFormat format;
  int64_t out, in;
  bool quantize_input;  // false: wo_a-like bf16-exact inputs taken as they are
  double tolerance;     // bf16 outputs 1e-2; fp32 hi + lo 1e-4; fp32 sums in another order 3e-5
  std::vector<int64_t> rows;
};

std::string rows_label(int64_t n) { return std::to_string(n) + " rows"; }

}  // namespace

std::vector<KernelCheck> decode_dense_kernel_report() {
  std::vector<KernelCheck> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return out;
  Exec e;
  cudaStreamCreate(&e.stream);
  const int max_rows0 = gemv_max_rows();
  std::mt19937 rng(43);
  // The V4-Flash slice's shapes: q up / output projections (FP8), a 16,384-row piece of the bf16
  // LM head, the fp32 mHC mix, an FP8 weight of 64 outputs (the indexer weights' width).
  const std::vector<Case> cases = {
      {"wq_b FP8", DevFormat::FP8, 32768, 1024, true, 1e-2, {16, 64, 256}},
      {"wo_b FP8", DevFormat::FP8, 4096, 8192, true, 1e-2, {16, 64, 256}},
      {"wq_a FP8", DevFormat::FP8, 1024, 4096, true, 1e-2, {16, 64}},
      {"head bf16 (16384 rows of it)", DevFormat::BF16, 16384, 4096, true, 1e-4, {16, 64}},
      {"mHC mix f32", DevFormat::F32, 24, 16384, true, 3e-5, {16, 64, 256}},
      {"narrow FP8 (bf16-exact x)", DevFormat::FP8, 64, 4096, false, 1e-2, {16, 64, 256}},
  };
  for (const Case& c : cases) {
    Matrix m = random_matrix(e, c.format, c.out, c.in, rng);
    m.w.quantize_input = c.quantize_input;
    const double wbytes = static_cast<double>(m.data.bytes() + m.scale.bytes());
    for (const int64_t n : c.rows) {
      std::normal_distribution<float> g(0.0f, 1.0f);
      std::vector<float> hx(static_cast<size_t>(n * c.in));
      for (auto& v : hx) v = c.quantize_input ? g(rng) : bf16r(g(rng));
      DeviceArray<float> x, y, xq;
      x.upload(e, hx);
      xq.allocate(e, hx.size());
      y.allocate(e, static_cast<size_t>(n * c.out));
      const bool fast0 = fast_kernels();
      set_fast_kernels(false);
      linear(e, x.ptr, c.in, n, m.w, y.ptr, c.out, true, xq.ptr);
      std::vector<float> ref(y.count), got(y.count);
      e.to_host(ref.data(), y.ptr, y.bytes());
      set_fast_kernels(fast0);
      const double bytes = wbytes + 4.0 * static_cast<double>(n) * (c.in + c.out);
      for (const bool passes : {true, false}) {
        set_gemv_max_rows(passes ? static_cast<int>(n) : 8);
        auto run = [&] { linear(e, x.ptr, c.in, n, m.w, y.ptr, c.out, true, xq.ptr); };
        e.note(cudaMemsetAsync(y.ptr, 0xFF, y.bytes(), e.stream));
        run();
        e.to_host(got.data(), y.ptr, y.bytes());
        const double ms = time_ms(e, 10, run);
        const OutputError err = max_rel_error(ref, got);
        const double gbs = bytes / (ms * 1e-3) / 1e9;
        KernelCheck kc;
        kc.tolerance = c.tolerance;
        kc.rel_error = e.sync().ok() ? err.rel : 1.0;
        char line[256];
        std::snprintf(line, sizeof line,
                      "%-30s %5lldx%-5lld %-8s %-12s %8.4f ms %7.0f GB/s (%5.1f%% of 4.8 TB/s)  "
                      "rel.err %.2e (tol %.0e)",
                      c.name, static_cast<long long>(c.out), static_cast<long long>(c.in),
                      rows_label(n).c_str(), passes ? "GEMV passes" : "default", ms, gbs,
                      100.0 * gbs / kHbmGbs, kc.rel_error, c.tolerance);
        kc.line = line;
        out.push_back(kc);
      }
    }
  }
  set_gemv_max_rows(max_rows0);
  if (e.error != cudaSuccess) {
    KernelCheck kc;
    kc.line =
        std::string("CUDA error in the decode product checks: ") + cudaGetErrorString(e.error);
    kc.rel_error = 1;
    out.push_back(kc);
  }
  cudaStreamDestroy(e.stream);
  return out;
}

}  // namespace deepinfer::cuda
