#include "backend/cuda/exec.cuh"

namespace deepinfer::cuda {

bool env_switch(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  return std::strcmp(v, "0") != 0;
}

bool pdl_enabled(bool pdl_auto) {
  static const int mode = [] {  // 0 never, 1 always, 2 where asked
    const char* v = std::getenv("DEEPINFER_CUDA_PDL");
    return !v || !*v ? 2 : std::strcmp(v, "0") == 0 ? 0 : 1;
  }();
  return mode == 1 || (mode == 2 && pdl_auto);
}

int sm_count() {
  static const int n = [] {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 132;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return 132;
    return v > 0 ? v : 132;
  }();
  return n;
}

void* Exec::alloc(size_t bytes) {
  if (emulate) return std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  void* p = nullptr;
  note(cudaMalloc(&p, bytes));
  return p;
}

void Exec::release(void* p) {
  if (emulate) {
    std::free(p);
  } else {
    cudaFree(p);
  }
}

void Exec::to_device(void* dst, const void* src, size_t bytes) {
  if (emulate) {
    std::memcpy(dst, src, bytes);
  } else {
    note(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
  }
}

void Exec::to_host(void* dst, const void* src, size_t bytes) {
  if (emulate) {
    std::memcpy(dst, src, bytes);
  } else {
    note(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
  }
}

void Exec::fill_zero(void* dst, size_t bytes) {
  if (emulate) {
    std::memset(dst, 0, bytes);
  } else {
    note(cudaMemsetAsync(dst, 0, bytes, stream));
  }
}

Status Exec::sync() {
  if (!emulate) note(cudaStreamSynchronize(stream));
  if (error != cudaSuccess) return Error{std::string("CUDA: ") + cudaGetErrorString(error)};
  return Status::Ok();
}

}  // namespace deepinfer::cuda
