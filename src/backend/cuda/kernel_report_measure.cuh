// What the kernel reports measure of a kernel: its wall time on the device (ms per call, after
// one warm-up call, timed by events on the Exec's stream) and how far its outputs are from the
// reference's.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cuda/exec.cuh"

namespace deepinfer::cuda {

template <class F>
double time_ms(Exec& e, int iters, F&& f) {
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  f();
  cudaEventRecord(t0, e.stream);
  for (int i = 0; i < iters; ++i) f();
  cudaEventRecord(t1, e.stream);
  cudaEventSynchronize(t1);
  float ms = 0;
  cudaEventElapsedTime(&ms, t0, t1);
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  return ms / iters;
}

// max |ref − got| / max |ref|; 1 when a value is not finite (counted in non_finite) or ref is all
// 0.
struct OutputError {
  double rel = 1.0;
  int64_t non_finite = 0;
};
inline OutputError max_rel_error(const std::vector<float>& ref, const std::vector<float>& got) {
  double mag = 0, diff = 0;
  OutputError e;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(ref[i]) || !std::isfinite(got[i])) {
      ++e.non_finite;
      continue;
    }
    mag = std::max(mag, static_cast<double>(std::fabs(ref[i])));
    diff = std::max(diff, static_cast<double>(std::fabs(ref[i] - got[i])));
  }
  e.rel = e.non_finite > 0 || mag == 0 ? 1.0 : diff / mag;
  return e;
}

}  // namespace deepinfer::cuda
