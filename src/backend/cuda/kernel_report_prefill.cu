// Device check of two prefill products against the reference body of linear() (one thread per
// output): wo_a's shape (a 1,024-row view into an FP8 matrix, bf16-exact inputs, bf16 outputs) on
// the WMMA tiles' FP8 vector loads and on cuBLASLt after a bf16 dequantization, at 512 and 8,192
// rows, and the short-output fp32 kernel on the mHC mix's shape (24 × 16,384) at 512 rows; with
// their times.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/gemm_lt.cuh"
#include "backend/cuda/gemm_short.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/kernel_report.h"
#include "backend/cuda/kernel_report_matrix.cuh"
#include "backend/cuda/kernel_report_measure.cuh"
#include "backend/cuda/ops.cuh"

namespace deepinfer::cuda {
namespace {

// run(): the kernel under test into y; the reference body of linear() into y first.
template <class Run>
KernelCheck compare(Exec& e, const std::string& what, const float* x, int64_t n, const DevWeight& w,
                    bool official, DeviceArray<float>& y, DeviceArray<float>& xq, double tolerance,
                    double flops, Run run) {
  const bool fast0 = fast_kernels();
  set_fast_kernels(false);
  e.note(cudaMemsetAsync(y.ptr, 0xFF, y.bytes(), e.stream));
  linear(e, x, w.in, n, w, y.ptr, w.out, official, xq.ptr);
  std::vector<float> ref(y.count), got(y.count);
  e.to_host(ref.data(), y.ptr, y.bytes());
  set_fast_kernels(fast0);
  e.note(cudaMemsetAsync(y.ptr, 0xFF, y.bytes(), e.stream));
  run();
  e.to_host(got.data(), y.ptr, y.bytes());
  const double ms = time_ms(e, 10, run);
  const OutputError err = max_rel_error(ref, got);
  KernelCheck kc;
  kc.tolerance = tolerance;
  kc.rel_error = e.sync().ok() ? err.rel : 1.0;
  char line[256];
  std::snprintf(line, sizeof line, "%-44s %8.4f ms  %6.1f TFLOP/s  rel.err %.2e (tol %.0e)%s",
                what.c_str(), ms, flops / ms * 1e-9, kc.rel_error, tolerance,
                err.non_finite ? " (non-finite values)" : "");
  kc.line = line;
  return kc;
}

}  // namespace

std::vector<KernelCheck> prefill_kernel_report() {
  std::vector<KernelCheck> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return out;
  Exec e;
  cudaStreamCreate(&e.stream);
  std::mt19937 rng(31);
  constexpr int64_t n = 512;
  // wo_a: group 1 of an FP8 [2048, 4096] matrix, inputs bf16-exact, outputs bf16; on the WMMA
  // tiles and on cuBLASLt with the weight dequantized per launch or kept as a bf16 copy.
  // The kept bf16 copies (like the cuBLASLt scale layouts) are found by the weight's address, which
  // a weight keeps for the model's life: both matrices stay allocated so that the second is not
  // given the first one's freed address and served its stale copy.
  std::vector<Matrix> alive;
  alive.reserve(2);
  for (const int64_t rows : {n, int64_t{8192}}) {
    Matrix& m = alive.emplace_back(random_matrix(e, DevFormat::FP8, 2048, 4096, rng));
    DevWeight w = m.w.rows(1024, 1024);
    w.quantize_input = false;
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> hx(static_cast<size_t>(rows * w.in));
    for (auto& v : hx) v = bf16r(g(rng));
    DeviceArray<float> x, y, xq;
    x.upload(e, hx);
    y.allocate(e, static_cast<size_t>(rows * w.out));
    xq.allocate(e, hx.size());
    const double flops = 2.0 * rows * w.out * w.in;
    const std::string shape = "wo_a FP8 1024x4096 (row view), " + std::to_string(rows) + " rows, ";
    out.push_back(compare(e, shape + "WMMA", x.ptr, rows, w, true, y, xq, 1e-2, flops,
                          [&] { gemm_tc(e, x.ptr, w.in, rows, w, y.ptr, w.out, true); }));
    for (const LtDequant mode : {LtDequant::PerLaunch, LtDequant::Kept}) {
      const std::string how = mode == LtDequant::Kept ? "Lt bf16 copy" : "Lt dequant/launch";
      out.push_back(compare(e, shape + how, x.ptr, rows, w, true, y, xq, 1e-2, flops, [&] {
        lt_dequant_linear(e, x.ptr, w.in, rows, w, y.ptr, w.out, mode);
      }));
    }
  }
  for (const int64_t rows : {n, int64_t{8192}}) {  // the mHC mix: fp32 [24, 16384]
    Matrix m = random_matrix(e, DevFormat::F32, 24, 16384, rng);
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> hx(static_cast<size_t>(rows * m.w.in));
    for (auto& v : hx) v = g(rng);
    DeviceArray<float> x, y, xq;
    x.upload(e, hx);
    y.allocate(e, static_cast<size_t>(rows * m.w.out));
    xq.allocate(e, hx.size());
    // The 4,096-row kernel sums K in four interleaved quarters, the reference in one fp32 pass:
    // over 16,384 terms the two orders differ by ~6e-6 of the largest output (a host simulation
    // of both orders); the 16-row kernel keeps the reference's order.
    const double tolerance = rows >= 4096 ? 3e-5 : 1e-5;
    out.push_back(compare(e,
                          "mHC mix f32 24x16384, " + std::to_string(rows) + " rows, short-output",
                          x.ptr, rows, m.w, true, y, xq, tolerance, 2.0 * rows * m.w.out * m.w.in,
                          [&] { gemm_short_out(e, x.ptr, m.w.in, rows, m.w, y.ptr, m.w.out); }));
  }
  if (e.error != cudaSuccess) {
    KernelCheck kc;
    kc.line =
        std::string("CUDA error in the prefill product checks: ") + cudaGetErrorString(e.error);
    kc.rel_error = 1;
    out.push_back(kc);
  }
  cudaStreamDestroy(e.stream);
  return out;
}

}  // namespace deepinfer::cuda
