#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "backend/cuda/gemm_lt.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/gemv_group.cuh"
#include "backend/cuda/kernel_report.h"
#include "backend/cuda/kernel_report_matrix.cuh"
#include "backend/cuda/ops.cuh"

namespace deepinfer::cuda {

Matrix random_matrix(Exec& e, DevFormat f, int64_t out, int64_t in, std::mt19937& rng) {
  Matrix m;
  m.w.format = f;
  m.w.out = out;
  m.w.in = in;
  m.w.stride = in;
  const size_t bytes = static_cast<size_t>(f == DevFormat::F32    ? out * in * 4
                                           : f == DevFormat::BF16 ? out * in * 2
                                           : f == DevFormat::FP4  ? out * in / 2
                                                                  : out * in);
  std::vector<uint8_t> h(bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  if (f == DevFormat::F32) {  // normal values, not random bit patterns
    std::normal_distribution<float> g(0.0f, 0.05f);
    for (size_t i = 0; i < bytes; i += 4) {
      const float v = g(rng);
      std::memcpy(&h[i], &v, 4);
    }
  }
  for (size_t i = 0; i < bytes && f != DevFormat::F32; ++i) {
    uint8_t b = static_cast<uint8_t>(byte(rng));
    if (f == DevFormat::FP8 && (b & 0x7f) == 0x7f) b ^= 1;  // no NaN codes
    if (f == DevFormat::BF16 && (i & 1)) b = static_cast<uint8_t>(0x3c + (b & 0x3) + (b & 0x80));
    h[i] = b;
  }
  m.data.upload(e, h);
  m.w.data = m.data.ptr;
  if (f == DevFormat::FP8 || f == DevFormat::FP4) {
    m.w.block_out = f == DevFormat::FP8 ? 128 : 1;
    m.w.block_in = f == DevFormat::FP8 ? 128 : 32;
    const int64_t so = (out + m.w.block_out - 1) / m.w.block_out, si = in / m.w.block_in;
    std::vector<uint8_t> s(static_cast<size_t>(so * si));
    for (auto& v : s) v = static_cast<uint8_t>(120 + byte(rng) % 8);
    m.scale.upload(e, s);
    m.w.scale = m.scale.ptr;
    m.w.scale_stride = si;
  }
  return m;
}

namespace {

const char* name(DevFormat f) {
  return f == DevFormat::BF16  ? "bf16"
         : f == DevFormat::FP8 ? "fp8"
         : f == DevFormat::FP4 ? "fp4"
                               : "f32";
}

}  // namespace

void select_kernels(int gemv_version, bool tensor_cores) {
  set_gemv_version(gemv_version);
  set_tensor_cores(tensor_cores);
}

std::vector<KernelCheck> kernel_report() {
  std::vector<KernelCheck> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return out;
  const int version0 = gemv_version();
  const bool tc0 = tensor_cores();
  Exec e;
  cudaStreamCreate(&e.stream);
  std::mt19937 rng(7);
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  for (DevFormat f : {DevFormat::BF16, DevFormat::FP8, DevFormat::FP4}) {
    const int64_t in = 7168, rows_out = f == DevFormat::FP4 ? 32768 : 16384;
    Matrix m = random_matrix(e, f, rows_out, in, rng);
    for (int64_t n : {1, 4, 16, 64, 512}) {
      std::vector<float> hx(static_cast<size_t>(n * in));
      std::normal_distribution<float> g(0.0f, 1.0f);
      for (auto& v : hx) v = g(rng);
      DeviceArray<float> x, y_ref, y_fast, xq;
      x.upload(e, hx);
      xq.allocate(e, hx.size());
      y_ref.allocate(e, static_cast<size_t>(n * rows_out));
      y_fast.allocate(e, static_cast<size_t>(n * rows_out));
      // variants: decode GEMV v1 / v2 (exact fp32 inputs); prefill fp32 tiles (exact) and the
      // tensor-core tiles (official: FP8-quantized inputs, bf16 outputs)
      for (int variant = 0; variant < 2; ++variant) {
        const bool official = n > 8 && variant == 1;
        if (n <= 8) set_gemv_version(variant + 1);
        set_tensor_cores(official);
        const int64_t check_rows = n > 64 ? 64 : n;  // the reference is slow: check a slice
        set_fast_kernels(false);
        linear(e, x.ptr, in, check_rows, m.w.rows(0, 2048), y_ref.ptr, rows_out, official, xq.ptr);
        set_fast_kernels(true);
        linear(e, x.ptr, in, n, m.w, y_fast.ptr, rows_out, official, xq.ptr);
        std::vector<float> a(static_cast<size_t>(n * rows_out)), b(a.size());
        e.to_host(a.data(), y_ref.ptr, a.size() * 4);
        e.to_host(b.data(), y_fast.ptr, b.size() * 4);
        if (!e.sync().ok()) break;
        double num = 0, den = 0;
        for (int64_t r = 0; r < check_rows; ++r) {
          for (int64_t o = 0; o < 2048; ++o) {
            const size_t i = static_cast<size_t>(r * rows_out + o);
            num = std::max(num, static_cast<double>(std::fabs(a[i] - b[i])));
            den = std::max(den, static_cast<double>(std::fabs(a[i])));
          }
        }
        const int iters = n >= 64 ? 5 : 50;
        cudaEventRecord(t0, e.stream);
        for (int it = 0; it < iters; ++it)
          linear(e, x.ptr, in, n, m.w, y_fast.ptr, rows_out, official, xq.ptr);
        cudaEventRecord(t1, e.stream);
        cudaEventSynchronize(t1);
        float ms = 0;
        cudaEventElapsedTime(&ms, t0, t1);
        ms /= static_cast<float>(iters);
        const double wbytes = static_cast<double>(m.data.bytes() + m.scale.bytes());
        const double gbs = wbytes / (ms * 1e-3) / 1e9;
        const double tflops = 2.0 * static_cast<double>(n) * rows_out * in / (ms * 1e-3) / 1e12;
        const bool lt = n > gemv_max_rows() && lt_gemm() &&
                        (f == DevFormat::BF16 || (f == DevFormat::FP8 && official));
        const char* what = n <= 8 ? (variant == 0 ? "gemv-v1" : "gemv-v2")
                           : lt   ? (f == DevFormat::BF16 ? "lt-bf16 " : "lt-fp8  ")
                           : official && f != DevFormat::BF16 ? "tile-tc "
                           : n <= gemv_max_rows()             ? "gemv-x8 "
                                                              : "tile-f32";
        char line[256];
        std::snprintf(line, sizeof line,
                      "%-4s %s %6lldx%lld n=%-4lld %8.3f ms  %7.1f GB/s of weights (%4.1f%% of "
                      "4.8 TB/s)  %6.2f TFLOP/s  rel.err %.2e",
                      name(f), what, static_cast<long long>(rows_out), static_cast<long long>(in),
                      static_cast<long long>(n), ms, gbs, gbs / 48.0, tflops,
                      den > 0 ? num / den : 0);
        KernelCheck kc;
        kc.line = line;
        kc.rel_error = den > 0 ? num / den : 0;
        kc.tolerance = official ? 1e-2 : 1e-4;
        out.push_back(kc);
      }
    }
  }
  // Short-output products (mHC mix, router, compressor and indexer heads, the q/kv down
  // projections): the split-row kernel below 2048 columns, at 1, 3 and 8 rows.
  struct Shape {
    DevFormat f;
    int64_t out, in;
  };
  for (const Shape& sh : {Shape{DevFormat::F32, 24, 16384}, Shape{DevFormat::BF16, 256, 4096},
                          Shape{DevFormat::FP8, 1024, 4096}, Shape{DevFormat::FP4, 512, 4096}}) {
    Matrix m = random_matrix(e, sh.f, sh.out, sh.in, rng);
    for (int64_t n : {1, 3, 8}) {
      std::vector<float> hx(static_cast<size_t>(n * sh.in));
      std::normal_distribution<float> g(0.0f, 1.0f);
      for (auto& v : hx) v = g(rng);
      DeviceArray<float> x, y_ref, y_fast, xq;
      x.upload(e, hx);
      xq.allocate(e, hx.size());
      y_ref.allocate(e, static_cast<size_t>(n * sh.out));
      y_fast.allocate(e, static_cast<size_t>(n * sh.out));
      set_fast_kernels(false);
      linear(e, x.ptr, sh.in, n, m.w, y_ref.ptr, sh.out, false, xq.ptr);
      set_fast_kernels(true);
      linear(e, x.ptr, sh.in, n, m.w, y_fast.ptr, sh.out, false, xq.ptr);
      std::vector<float> a(static_cast<size_t>(n * sh.out)), b(a.size());
      e.to_host(a.data(), y_ref.ptr, a.size() * 4);
      e.to_host(b.data(), y_fast.ptr, b.size() * 4);
      if (!e.sync().ok()) break;
      double num = 0, den = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        num = std::max(num, static_cast<double>(std::fabs(a[i] - b[i])));
        den = std::max(den, static_cast<double>(std::fabs(a[i])));
      }
      const int iters = 50;
      cudaEventRecord(t0, e.stream);
      for (int it = 0; it < iters; ++it)
        linear(e, x.ptr, sh.in, n, m.w, y_fast.ptr, sh.out, false, xq.ptr);
      cudaEventRecord(t1, e.stream);
      cudaEventSynchronize(t1);
      float ms = 0;
      cudaEventElapsedTime(&ms, t0, t1);
      ms /= static_cast<float>(iters);
      char line[256];
      std::snprintf(line, sizeof line, "%-4s split-row %5lldx%lld n=%-4lld %8.4f ms  rel.err %.2e",
                    name(sh.f), static_cast<long long>(sh.out), static_cast<long long>(sh.in),
                    static_cast<long long>(n), ms, den > 0 ? num / den : 0);
      KernelCheck kc;
      kc.line = line;
      kc.rel_error = den > 0 ? num / den : 1.0;
      kc.tolerance = 1e-4;
      out.push_back(kc);
    }
  }
  {  // Split-row products of one input in one launch (gemv_group.cuh): the same bits as a
     // gemv() each, and the time of the launch beside the separate ones.
    std::vector<Matrix> ms;
    for (const Shape& sh : {Shape{DevFormat::FP8, 1024, 4096}, Shape{DevFormat::FP8, 512, 4096},
                            Shape{DevFormat::BF16, 256, 4096}, Shape{DevFormat::FP4, 512, 4096},
                            Shape{DevFormat::F32, 64, 4096}})
      ms.push_back(random_matrix(e, sh.f, sh.out, sh.in, rng));
    int64_t total_out = 0;
    for (const Matrix& m : ms) total_out += m.w.out;
    for (int64_t n : {1, 3, 8}) {
      std::vector<float> hx(static_cast<size_t>(n * 4096));
      std::normal_distribution<float> g(0.0f, 1.0f);
      for (auto& v : hx) v = g(rng);
      DeviceArray<float> x, y_one, y_group;
      x.upload(e, hx);
      y_one.allocate(e, static_cast<size_t>(n * total_out));
      y_group.allocate(e, static_cast<size_t>(n * total_out));
      e.note(cudaMemsetAsync(y_group.ptr, 0xFF, y_group.bytes(), e.stream));
      GemvJob jobs[kMaxGemvJobs];
      int count = 0;
      int64_t col = 0;
      bool ok = true;
      for (const Matrix& m : ms) {
        ok = ok && gemv_split_row(m.w, n, x.ptr, 4096);
        jobs[count++] = {&m.w, nullptr, y_group.ptr + col, total_out, m.w.quantized()};
        col += m.w.out;
      }
      auto separate = [&] {
        int64_t c0 = 0;
        for (const Matrix& m : ms) {
          gemv(e, x.ptr, 4096, n, m.w, y_one.ptr + c0, total_out, m.w.quantized());
          c0 += m.w.out;
        }
      };
      separate();
      gemv_split_row_group(e, x.ptr, 4096, n, jobs, count);
      std::vector<float> a(static_cast<size_t>(n * total_out)), b(a.size());
      e.to_host(a.data(), y_one.ptr, a.size() * 4);
      e.to_host(b.data(), y_group.ptr, b.size() * 4);
      int64_t differ = -1;
      if (e.sync().ok() && ok) {
        differ = 0;
        for (size_t i = 0; i < a.size(); ++i) differ += std::memcmp(&a[i], &b[i], 4) != 0;
      }
      auto time = [&](auto f) {
        f();
        cudaEventRecord(t0, e.stream);
        for (int it = 0; it < 50; ++it) f();
        cudaEventRecord(t1, e.stream);
        cudaEventSynchronize(t1);
        float t = 0;
        cudaEventElapsedTime(&t, t0, t1);
        return t / 50;
      };
      const float ms_one = time(separate);
      const float ms_group = time([&] { gemv_split_row_group(e, x.ptr, 4096, n, jobs, count); });
      char line[256];
      std::snprintf(line, sizeof line,
                    "split-row group of %d (%lld columns) n=%lld: one launch %.4f ms, %d launches "
                    "%.4f ms, %lld of %zu values differ",
                    count, static_cast<long long>(total_out), static_cast<long long>(n), ms_group,
                    count, ms_one, static_cast<long long>(differ), a.size());
      KernelCheck kc;
      kc.line = line;
      kc.rel_error = differ < 0 ? 1.0 : static_cast<double>(differ);
      kc.tolerance = 0;
      out.push_back(kc);
    }
  }
  {  // FP8 activation quantization: the warp-per-block kernel against the serial body, bitwise
    const int64_t rows = 16, dim = 7168 + 96;  // a short last block
    std::vector<float> hx(static_cast<size_t>(rows * dim));
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::uniform_real_distribution<float> mag(-6.0f, 6.0f);
    for (size_t i = 0; i < hx.size(); i += 128) {
      const float m = std::exp2(mag(rng));
      for (size_t j = i; j < std::min(hx.size(), i + 128); ++j) hx[j] = g(rng) * m;
    }
    DeviceArray<float> a, b, c, wide;
    a.upload(e, hx);
    b.upload(e, hx);
    // The same rows inside wider ones (stride dim + 64), quantized into a copy in one launch.
    std::vector<float> hw(static_cast<size_t>(rows * (dim + 64)), 7.0f);
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(hx.begin() + r * dim, dim, hw.begin() + r * (dim + 64));
    wide.upload(e, hw);
    c.allocate(e, hx.size());
    set_fast_kernels(false);
    fp8_quant_rows(e, a.ptr, rows, dim, 128);
    set_fast_kernels(true);
    fp8_quant_rows(e, b.ptr, rows, dim, 128);
    fp8_quant_rows_from(e, wide.ptr, dim + 64, rows, dim, 128, c.ptr);
    std::vector<float> ha(hx.size()), hb(hx.size()), hc(hx.size());
    e.to_host(ha.data(), a.ptr, ha.size() * 4);
    e.to_host(hb.data(), b.ptr, hb.size() * 4);
    e.to_host(hc.data(), c.ptr, hc.size() * 4);
    int64_t differ = -1;
    if (e.sync().ok()) {
      differ = 0;
      for (size_t i = 0; i < ha.size(); ++i)
        differ += std::memcmp(&ha[i], &hb[i], 4) != 0 || std::memcmp(&ha[i], &hc[i], 4) != 0;
    }
    KernelCheck kc;
    kc.line =
        "fp8 activation quantization, warp kernel (in place, and from strided rows) vs "
        "serial body: " +
        std::to_string(differ) + " of " + std::to_string(ha.size()) + " values differ";
    kc.rel_error = differ < 0 ? 1.0 : static_cast<double>(differ);
    kc.tolerance = 0;
    out.push_back(kc);
  }
  set_gemv_version(version0);
  set_tensor_cores(tc0);
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  cudaStreamDestroy(e.stream);
  return out;
}

}  // namespace deepinfer::cuda
