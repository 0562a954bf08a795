// Device check of the one-row GEMV (gemv_row1.cuh) on the V4-Flash slice's batch-1 shapes: each
// stage count and split target against the reference body (fp32 inputs and outputs: ≤ 1e-4 of the
// largest output, another summation order), its time beside the older kernels' and a copy of
// the same bytes; and the two split-row groups of a decode step (wo_a's eight groups, the
// attention sublayer's products of xn) as one launch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/gemv.cuh"
#include "backend/cuda/gemv_group.cuh"
#include "backend/cuda/gemv_row1.cuh"
#include "backend/cuda/kernel_report.h"
#include "backend/cuda/kernel_report_matrix.cuh"
#include "backend/cuda/kernel_report_measure.cuh"
#include "backend/cuda/ops.cuh"

namespace deepinfer::cuda {
namespace {

constexpr double kTol = 1e-4;

struct Job {
  const char* name;
  DevFormat format;
  int64_t out, in;
};

// A product of one or more jobs (several: one split-row group launch), each its own input row.
struct Product {
  const char* name;
  std::vector<Job> jobs;
};

double bytes_of(const std::vector<Matrix>& ms) {
  double b = 0;
  for (const Matrix& m : ms) b += static_cast<double>(m.data.bytes() + m.scale.bytes());
  return b;
}

}  // namespace

std::vector<KernelCheck> gemv_row1_kernel_report() {
  std::vector<KernelCheck> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return out;
  Exec e;
  cudaStreamCreate(&e.stream);
  const bool row1_0 = gemv_row1_on();
  const int warps0 = gemv_row1_warps(), stages0 = gemv_row1_stages();
  std::mt19937 rng(47);
  // Single FP8 products outside the split-row shapes (wq_b, wo_b, the shared expert) keep
  // gemv.cu's row kernels, faster there; an FP8 split-row shape alone stands in for them.
  const std::vector<Product> products = {
      {"wq_a FP8", {{"wq_a", DevFormat::FP8, 1024, 4096}}},
      {"LM head bf16 (32768 rows)", {{"head", DevFormat::BF16, 32768, 4096}}},
      {"wo_a group", std::vector<Job>(8, Job{"wo_a", DevFormat::FP8, 1024, 4096})},
      {"xn group",
       {{"wq_a", DevFormat::FP8, 1024, 4096},
        {"wkv", DevFormat::FP8, 512, 4096},
        {"comp", DevFormat::BF16, 1024, 4096},
        {"iw", DevFormat::FP8, 64, 4096}}},
  };
  struct Tuning {
    int warps, stages;
  };
  const std::vector<Tuning> tunings = {{132 * 32, 3}, {132 * 32, 4}, {132 * 16, 3}, {132 * 64, 3}};
  for (const Product& p : products) {
    std::vector<Matrix> ms;
    int64_t total_out = 0;
    for (const Job& j : p.jobs) {
      ms.push_back(random_matrix(e, j.format, j.out, j.in, rng));
      total_out += j.out;
    }
    const int64_t in = p.jobs[0].in;
    const size_t nj = p.jobs.size();
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> hx(nj * static_cast<size_t>(in));
    for (auto& v : hx) v = g(rng);
    DeviceArray<float> x, y, ref, copy_dst;
    x.upload(e, hx);
    y.allocate(e, static_cast<size_t>(total_out));
    ref.allocate(e, static_cast<size_t>(total_out));
    // Copies of the weights, so that cycling through them reads ≥ 200 MB (4 × the L2) between
    // two reads of one: the weights come from HBM as in a decode step.
    const double bytes = bytes_of(ms);
    const int copies = static_cast<int>(std::min(32.0, std::ceil(200e6 / bytes)));
    std::vector<DeviceArray<uint8_t>> clones(static_cast<size_t>(copies - 1) * nj);
    std::vector<std::vector<DevWeight>> views(static_cast<size_t>(copies));
    for (int k = 0; k < copies; ++k) {
      for (size_t j = 0; j < nj; ++j) {
        DevWeight v = ms[j].w;
        if (k > 0) {
          DeviceArray<uint8_t>& c = clones[static_cast<size_t>(k - 1) * nj + j];
          c.allocate(e, ms[j].data.count);
          e.note(cudaMemcpyAsync(c.ptr, ms[j].data.ptr, ms[j].data.bytes(),
                                 cudaMemcpyDeviceToDevice, e.stream));
          v.data = c.ptr;
        }
        views[static_cast<size_t>(k)].push_back(v);
      }
    }
    auto run_copy = [&](int k) {
      const std::vector<DevWeight>& ws = views[static_cast<size_t>(k)];
      if (nj == 1) {
        linear(e, x.ptr, in, 1, ws[0], y.ptr, total_out, false, nullptr);
        return;
      }
      GemvJob jobs[kMaxGemvJobs];
      int64_t col = 0;
      for (size_t j = 0; j < nj; ++j) {
        jobs[j] = {&ws[j], x.ptr + j * in, y.ptr + col, total_out, false};
        col += p.jobs[j].out;
      }
      gemv_split_row_group(e, x.ptr, in, 1, jobs, static_cast<int>(nj));
    };
    auto run = [&] { run_copy(0); };
    int next = 0;
    auto run_cold = [&] {
      run_copy(next);
      next = (next + 1) % copies;
    };
    const bool fast0 = fast_kernels();
    set_fast_kernels(false);
    int64_t col = 0;
    for (size_t j = 0; j < nj; ++j) {
      linear(e, x.ptr + j * in, in, 1, ms[j].w, ref.ptr + col, total_out, false, nullptr);
      col += p.jobs[j].out;
    }
    set_fast_kernels(fast0);
    std::vector<float> want(ref.count), got(ref.count);
    e.to_host(want.data(), ref.ptr, ref.bytes());
    auto measure = [&](const std::string& what) {
      e.note(cudaMemsetAsync(y.ptr, 0xFF, y.bytes(), e.stream));
      run();
      e.to_host(got.data(), y.ptr, y.bytes());
      const double ms_hot = time_ms(e, 20, run);
      const double ms_call = time_ms(e, 2 * copies > 20 ? 2 * copies : 20, run_cold);
      const OutputError err = max_rel_error(want, got);
      KernelCheck kc;
      kc.tolerance = kTol;
      kc.rel_error = e.sync().ok() ? err.rel : 1.0;
      const double gbs = bytes / (ms_call * 1e-3) / 1e9;
      char line[320];
      std::snprintf(line, sizeof line,
                    "row1 %-26s %6.1f MB %-26s %8.4f ms %6.0f GB/s (%5.1f%% of 4.8 TB/s), "
                    "L2-warm %8.4f ms, rel.err %.2e",
                    p.name, bytes / 1e6, what.c_str(), ms_call, gbs, gbs / 48.0, ms_hot,
                    kc.rel_error);
      kc.line = line;
      out.push_back(kc);
    };
    set_gemv_row1(false);
    measure("old kernels");
    set_gemv_row1(true);
    for (const Tuning& t : tunings) {
      set_gemv_row1_tuning(t.warps, t.stages);
      measure(std::to_string(t.stages) + " stages, warps " + std::to_string(t.warps));
    }
    set_gemv_row1_tuning(warps0, stages0);
    {  // A plain bandwidth number: a device copy of the first matrix's bytes (read + write).
      const size_t b = ms[0].data.bytes();
      copy_dst.allocate(e, b / 4 + 1);
      const double ms_copy = time_ms(e, 20, [&] {
        e.note(
            cudaMemcpyAsync(copy_dst.ptr, ms[0].data.ptr, b, cudaMemcpyDeviceToDevice, e.stream));
      });
      KernelCheck kc;
      char line[256];
      std::snprintf(line, sizeof line,
                    "row1 %-26s copy of %.1f MB: %8.4f ms, %6.0f GB/s read+write", p.name,
                    static_cast<double>(b) / 1e6, ms_copy,
                    2.0 * static_cast<double>(b) / (ms_copy * 1e-3) / 1e9);
      kc.line = line;
      kc.rel_error = e.sync().ok() ? 0.0 : 1.0;
      kc.tolerance = kTol;
      out.push_back(kc);
    }
  }
  set_gemv_row1(row1_0);
  if (e.error != cudaSuccess) {
    KernelCheck kc;
    kc.line = std::string("CUDA error in the one-row GEMV checks: ") + cudaGetErrorString(e.error);
    kc.rel_error = 1;
    out.push_back(kc);
  }
  cudaStreamDestroy(e.stream);
  return out;
}

}  // namespace deepinfer::cuda
