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
#include <utility>
#include <vector>

#include "common/result.h"

#define DI_HD __host__ __device__

namespace deepinfer::cuda {

// Programmatic dependent launch: Exec::launch lets a kernel's blocks start while the one before it
// on the stream is still running, so every kernel it launches calls this first, before it reads
// or writes memory: it waits until the grids it depends on have finished and their writes are
// visible, then lets the next launch start its blocks (they wait at their own first line). A
// no-op where the launch had no programmatic dependency.
__device__ __forceinline__ void pdl_begin() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// A switch from the environment: unset or empty gives `fallback`, "0" off, any other value on.
bool env_switch(const char* name, bool fallback);

// Whether Exec::launch asks for programmatic dependent launch: DEEPINFER_CUDA_PDL=1 always, =0
// never; unset, where the Exec asks (Exec::pdl_auto: the model's one-row steps). H100, batch 1,
// 2026-12-07: +1.7 % a step, 8 of 8 interleaved pairs faster (with the one-row wo_b on the
// tensor cores); the H200 had lost 4-5 % at batch 256 with it (bench/results/cuda.md).
bool pdl_enabled(bool pdl_auto);

// The current device's SM count, asked once (132 where it cannot be asked).
int sm_count();

template <class F>
__global__ void for_each_kernel(int64_t n, F f) {
  pdl_begin();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) f(i);
}

// The cuBLASLt handle, workspace and scratch of one stream (gemm_lt.cu), made on first use.
struct BlasState;

struct Exec {
  cudaStream_t stream = nullptr;
  bool emulate = false;
  cudaError_t error = cudaSuccess;  // first launch error seen
  bool pdl_auto = false;            // programmatic dependent launches unless DEEPINFER_CUDA_PDL=0
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
    launch(for_each_kernel<F>, static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, n,
           f);
  }
  // kernel<<<grid, block, shared, stream>>>(args...), as a programmatic dependent launch unless
  // pdl_enabled(pdl_auto) is false; the kernel must start with pdl_begin().
  template <class... Params, class... Args>
  void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared, Args&&... args) {
    launch_with(kernel, grid, block, shared, nullptr, std::forward<Args>(args)...);
  }
  // The same with the grid's blocks in thread-block clusters of `cluster`.
  template <class... Params, class... Args>
  void launch_cluster(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared, dim3 cluster,
                      Args&&... args) {
    launch_with(kernel, grid, block, shared, &cluster, std::forward<Args>(args)...);
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

 private:
  template <class... Params, class... Args>
  void launch_with(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared,
                   const dim3* cluster, Args&&... args) {
    cudaLaunchAttribute attr[2]{};
    unsigned na = 0;
    if (cluster) {
      attr[na].id = cudaLaunchAttributeClusterDimension;
      attr[na].val.clusterDim.x = cluster->x;
      attr[na].val.clusterDim.y = cluster->y;
      attr[na].val.clusterDim.z = cluster->z;
      ++na;
    }
    if (pdl_enabled(pdl_auto)) {
      attr[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[na].val.programmaticStreamSerializationAllowed = 1;
      ++na;
    }
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = shared;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = na;
    note(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
    note(cudaGetLastError());
  }
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
