// Wall time of a kernel on the device for the kernel reports: ms per call, after one warm-up call,
// timed by events on the Exec's stream.
#pragma once

#include <cuda_runtime.h>

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

}  // namespace deepinfer::cuda
