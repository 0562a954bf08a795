// How the CUDA backend runs work: every simple kernel is a __host__ __device__ body over an index
// range, launched on a stream, or (emulate) run by a host loop over host memory, so the whole
// forward can be checked without a GPU. Also the device allocations and copies of both modes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

#define DI_HD __host__ __device__

namespace deepinfer::cuda {

template <class F>
__global__ void for_each_kernel(int64_t n, F f) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) f(i);
}

// The cuBLASLt handle, workspace and scratch of one stream (gemm_lt.cu), made on first use.
struct BlasState;

struct Exec {
  cudaStream_t stream = nullptr;
  bool emulate = false;
  cudaError_t error = cudaSuccess;  // first launch error seen
  std::shared_ptr<BlasState> blas;

  // f(i) for i in [0, n): one thread each on the device, or a host loop.
  template <class F>
  void each(int64_t n, F f) {
    if (n <= 0) return;
    if (emulate) {
      for (int64_t i = 0; i < n; ++i) f(i);
      return;
    }
    constexpr int kThreads = 256;
    for_each_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        n, f);
    note(cudaGetLastError());
  }
  void note(cudaError_t e) {
    if (e != cudaSuccess && error == cudaSuccess) error = e;
  }

  void* alloc(size_t bytes);
  void release(void* p);
  void to_device(void* dst, const void* src, size_t bytes);
  void to_host(void* dst, const void* src, size_t bytes);
  void fill_zero(void* dst, size_t bytes);
  Status sync();
};

// A typed device (or, emulated, host) array owned by its Exec.
template <class T>
struct DeviceArray {
  Exec* exec = nullptr;
  T* ptr = nullptr;
  size_t count = 0;

  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept { *this = std::move(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      reset();
      exec = o.exec;
      ptr = o.ptr;
      count = o.count;
      o.ptr = nullptr;
      o.count = 0;
    }
    return *this;
  }
  ~DeviceArray() { reset(); }
  void reset() {
    if (ptr && exec) exec->release(ptr);
    ptr = nullptr;
    count = 0;
  }
  void allocate(Exec& e, size_t n) {
    reset();
    exec = &e;
    count = n;
    ptr = n ? static_cast<T*>(e.alloc(n * sizeof(T))) : nullptr;
  }
  void upload(Exec& e, const T* src, size_t n) {
    allocate(e, n);
    if (n) e.to_device(ptr, src, n * sizeof(T));
  }
  void upload(Exec& e, const std::vector<T>& v) { upload(e, v.data(), v.size()); }
  size_t bytes() const { return count * sizeof(T); }
};

}  // namespace deepinfer::cuda
