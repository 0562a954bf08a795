// What the per-row kernel checks (kernel_report_ops.cu, kernel_report_fused.cu) share: the
// stream, RNG and timing events of a report, random inputs, NaN poisoning, bitwise comparison and
// check(): a fast kernel against its reference body, bit for bit, with both times.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/exec.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/kernel_report.h"

namespace deepinfer::cuda {

struct Ctx {
  Exec& e;
  std::mt19937& rng;
  cudaEvent_t t0, t1;
};

// RoPE inverse frequencies for `rope_dim` rotated values (base 10,000), as the checks' tables.
inline std::vector<float> rope_inv_freq(int rope_dim) {
  std::vector<float> v(static_cast<size_t>(rope_dim / 2));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = std::pow(10000.0f, -2.0f * static_cast<float>(i) / static_cast<float>(rope_dim));
  return v;
}

inline std::vector<float> normal(Ctx& c, size_t n, float sd = 1.0f) {
  std::normal_distribution<float> g(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = g(c.rng);
  return v;
}

template <class T>
std::vector<T> to_host(Ctx& c, const DeviceArray<T>& a) {
  std::vector<T> h(a.count);
  c.e.to_host(h.data(), a.ptr, a.bytes());
  return h;
}

// NaN bytes (0xFF…) over a device array: -1 as an int32, a NaN as a float.
template <class T>
void poison(Ctx& c, const DeviceArray<T>& a) {
  if (a.count) c.e.note(cudaMemsetAsync(a.ptr, 0xFF, a.bytes(), c.e.stream));
}

inline int64_t nans(const std::vector<float>& v) {
  int64_t n = 0;
  for (float x : v) n += std::isnan(x);
  return n;
}

template <class T>
int64_t differing(const std::vector<T>& a, const std::vector<T>& b) {
  int64_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  return n;
}

// ms per call of f (after one warm-up call).
template <class F>
double time_ms(Ctx& c, int iters, F f) {
  f();
  cudaEventRecord(c.t0, c.e.stream);
  for (int i = 0; i < iters; ++i) f();
  cudaEventRecord(c.t1, c.e.stream);
  cudaEventSynchronize(c.t1);
  float ms = 0;
  cudaEventElapsedTime(&ms, c.t0, c.t1);
  return ms / iters;
}

// run(fast, reset) runs the reference body or the fast kernel (reset: from fresh inputs first,
// outputs filled with NaN); outputs() after the reference must equal those after the fast kernel,
// bit for bit, and hold no NaN (every value written).
template <class Run, class Out>
void check(Ctx& c, std::vector<KernelCheck>& out, const std::string& what, Run run, Out outputs) {
  set_fast_kernels(false);
  run(false, true);
  const auto ref = outputs();
  set_fast_kernels(true);
  run(true, true);
  const auto fast = outputs();
  int64_t differ = c.e.sync().ok() ? differing(ref, fast) : -1;
  if (ref.size() != fast.size()) differ = -1;
  const int64_t unwritten = nans(ref);
  if (unwritten > 0) differ = -1;
  set_fast_kernels(false);
  const double ms_ref = time_ms(c, 3, [&] { run(false, false); });
  set_fast_kernels(true);
  const double ms_fast = time_ms(c, 20, [&] { run(true, false); });
  char line[320];
  std::snprintf(line, sizeof line,
                "%-52s fast %8.4f ms  reference %8.4f ms  (%.0fx)  %lld of %zu values differ%s",
                what.c_str(), ms_fast, ms_ref, ms_fast > 0 ? ms_ref / ms_fast : 0.0,
                static_cast<long long>(differ), ref.size(),
                unwritten > 0 ? " (NaN left in the reference's outputs)" : "");
  KernelCheck kc;
  kc.line = line;
  kc.rel_error = differ < 0 ? 1.0 : static_cast<double>(differ);
  kc.tolerance = 0;
  out.push_back(kc);
}

// The stream and timing events of one report (made here, destroyed with it) and its Ctx; finish()
// adds a failing line for the first CUDA error its launches saw.
struct ReportDevice {
  Exec e;
  std::mt19937 rng;
  Ctx c;
  explicit ReportDevice(unsigned seed) : rng(seed), c{e, rng, nullptr, nullptr} {
    cudaStreamCreate(&e.stream);
    cudaEventCreate(&c.t0);
    cudaEventCreate(&c.t1);
  }
  ReportDevice(const ReportDevice&) = delete;
  ReportDevice& operator=(const ReportDevice&) = delete;
  ~ReportDevice() {
    cudaEventDestroy(c.t0);
    cudaEventDestroy(c.t1);
    cudaStreamDestroy(e.stream);
  }
  void finish(std::vector<KernelCheck>& out, const char* what) {
    if (e.error == cudaSuccess) return;
    KernelCheck kc;
    kc.line = std::string("CUDA error in the ") + what + ": " + cudaGetErrorString(e.error);
    kc.rel_error = 1;
    out.push_back(kc);
  }
};

}  // namespace deepinfer::cuda
