// sample_rows (sampling.cuh). The engine's Sampler sums the draw's terms in double in candidate
// order; here the id-order case sums per-thread chunks and then the chunks in order, which moves
// the running sums by rounding only (~1e-16 relative). exp is taken in double and rounded to float,
// the correctly rounded value glibc's expf returns, so the terms themselves match the host's.
#include <cfloat>

#include "backend/cuda/block_select.cuh"
#include "backend/cuda/sampling.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int kThreads = 1024, kWarps = kThreads / 32;

__device__ __forceinline__ float exp_rounded(float x) {
  return static_cast<float>(exp(static_cast<double>(x)));
}

// The block's maximum of v (NaN skipped, as fmaxf does); every thread gets it.
__device__ float block_max(float v, float* red) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  float m = -INFINITY;
  for (int w = 0; w < kWarps; ++w) m = fmaxf(m, red[w]);
  __syncthreads();
  return m;
}

template <class T>
__device__ T block_sum_int(T v, T* red) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  T s = 0;
  for (int w = 0; w < kWarps; ++w) s += red[w];
  __syncthreads();
  return s;
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(const float* logits, int64_t V, const SampleSpec* __restrict__ specs, float* work,
                  int32_t* __restrict__ tokens) {
  pdl_begin();
  __shared__ BlockSelectShared<kThreads> sh;
  __shared__ unsigned long long picked[kMaxDeviceTopK];
  __shared__ float fred[kWarps];
  __shared__ long long ired[kWarps];
  __shared__ double chunk_before[kThreads];
  __shared__ int s_token;
  __shared__ double s_total;
  const int tid = threadIdx.x;
  const int64_t r = blockIdx.x;
  const SampleSpec sp = specs[r];
  const float* l = logits + r * V;
  if (sp.mode == 0) {
    if (tid == 0) tokens[r] = -1;
    return;
  }
  if (sp.mode == 1) {  // argmax, the first of equal maxima
    float best = -INFINITY;
    int64_t at = -1;
    for (int64_t i = tid; i < V; i += kThreads)
      if (at < 0 || l[i] > best) {
        best = l[i];
        at = i;
      }
    const float m = block_max(at < 0 ? -INFINITY : best, fred);
    const long long first = (at >= 0 && best == m) ? at : V;
    // the lowest id holding the maximum: a min over threads
    long long v = first;
    for (int off = 16; off > 0; off >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, off));
    if (tid % 32 == 0) ired[tid / 32] = v;
    __syncthreads();
    if (tid == 0) {
      long long b = V;
      for (int w = 0; w < kWarps; ++w) b = min(b, ired[w]);
      tokens[r] = static_cast<int32_t>(b < V ? b : 0);
    }
    return;
  }
  float* w = work + r * V;
  float local_max = -INFINITY;
  for (int64_t i = tid; i < V; i += kThreads) {
    const float x = sp.inv_temperature != 1.0f ? l[i] * sp.inv_temperature : l[i];
    w[i] = x;
    local_max = fmaxf(local_max, x);
  }
  const float top = block_max(local_max, fred);  // also orders the writes of w before the reads
  const float min_logit = sp.has_min_p ? top + sp.log_min_p : -FLT_MAX;
  long long cand = 0;
  for (int64_t i = tid; i < V; i += kThreads) cand += w[i] >= min_logit;
  const long long n = block_sum_int(cand, ired);
  if (n == 0) {  // every logit -inf: the host falls back to id 0
    if (tid == 0) tokens[r] = 0;
    return;
  }
  // A top-k (or, with top_p, every candidate when there are no more than top_k): sorted.
  if (sp.top_k > 0 && (sp.top_k < n || sp.top_p < 1.0f)) {
    const int k = static_cast<int>(sp.top_k < n ? sp.top_k : n);
    block_select<kThreads>(
        V, k, false, [w, min_logit](int64_t j) { return w[j] >= min_logit ? order_key(w[j]) : 0u; },
        sh, picked);
    if (tid == 0) {  // the host's order: sorted candidates, sums in double one by one
      int kept = k;
      if (sp.top_p < 1.0f) {
        double total = 0.0;
        for (int i = 0; i < k; ++i) total += exp_rounded(w[picked[i] & 0xffffffffu] - top);
        const double target = static_cast<double>(sp.top_p) * total;
        double before = 0.0;
        kept = 0;
        while (kept < k && before < target)
          before += exp_rounded(w[picked[kept++] & 0xffffffffu] - top);
        if (kept < 1) kept = 1;
      }
      double total = 0.0;
      for (int i = 0; i < kept; ++i) total += exp_rounded(w[picked[i] & 0xffffffffu] - top);
      const double target = sp.uniform * total;
      int32_t token = static_cast<int32_t>(picked[kept - 1] & 0xffffffffu);
      double run = 0.0;
      for (int i = 0; i < kept; ++i) {
        run += exp_rounded(w[picked[i] & 0xffffffffu] - top);
        if (run > target) {
          token = static_cast<int32_t>(picked[i] & 0xffffffffu);
          break;
        }
      }
      tokens[r] = token;
    }
    return;
  }
  // Every candidate in id order: thread t sums ids [t·C, (t+1)·C), the chunk sums are added in
  // order, and the thread whose chunk holds the target walks it.
  const int64_t C = (V + kThreads - 1) / kThreads, lo = tid * C, hi = lo + C < V ? lo + C : V;
  double mine = 0.0;
  int64_t last = -1;
  for (int64_t i = lo; i < hi; ++i)
    if (w[i] >= min_logit) {
      mine += exp_rounded(w[i] - top);
      last = i;
    }
  chunk_before[tid] = mine;
  long long last_any = last;
  for (int off = 16; off > 0; off >>= 1)
    last_any = max(last_any, __shfl_xor_sync(0xffffffffu, last_any, off));
  if (tid % 32 == 0) ired[tid / 32] = last_any;
  __syncthreads();
  if (tid == 0) {
    double run = 0.0;
    for (int t = 0; t < kThreads; ++t) {
      const double c = chunk_before[t];
      chunk_before[t] = run;
      run += c;
    }
    long long lc = -1;
    for (int q = 0; q < kWarps; ++q) lc = max(lc, ired[q]);
    s_token = static_cast<int>(lc);  // the last candidate: where the host ends past the total
    s_total = run;
  }
  __syncthreads();
  const double total = s_total;
  const double target = sp.uniform * total;
  const double before = chunk_before[tid];
  if (before <= target && target < before + mine) {  // exactly one chunk holds the target
    double run = before;
    int64_t token = last;  // if rounding keeps the walk's sums below the target
    for (int64_t i = lo; i < hi; ++i)
      if (w[i] >= min_logit) {
        run += exp_rounded(w[i] - top);
        if (run > target) {
          token = i;
          break;
        }
      }
    s_token = static_cast<int>(token);
  }
  __syncthreads();
  if (tid == 0) tokens[r] = s_token;
}

}  // namespace

void sample_rows(Exec& e, const float* logits, int64_t rows, int64_t V, const SampleSpec* specs,
                 float* work, int32_t* tokens) {
  if (rows <= 0) return;
  e.launch(sample_kernel, static_cast<unsigned>(rows), kThreads, 0, logits, V, specs, work, tokens);
  e.note(cudaGetLastError());
}

}  // namespace deepinfer::cuda

namespace deepinfer::cuda {

Result<std::vector<int32_t>> sample_on_device(std::span<const float> logits, int64_t V,
                                              std::span<const SampleSpec> specs) {
  const int64_t rows = static_cast<int64_t>(specs.size());
  if (static_cast<int64_t>(logits.size()) != rows * V)
    return Error{"sample_on_device: logits are not rows × V"};
  Exec e;
  DeviceArray<float> l, work;
  DeviceArray<SampleSpec> sp;
  DeviceArray<int32_t> tokens;
  l.upload(e, logits.data(), logits.size());
  sp.upload(e, specs.data(), specs.size());
  work.allocate(e, static_cast<size_t>(rows * V));
  tokens.allocate(e, static_cast<size_t>(rows));
  sample_rows(e, l.ptr, rows, V, sp.ptr, work.ptr, tokens.ptr);
  std::vector<int32_t> out(static_cast<size_t>(rows));
  e.to_host(out.data(), tokens.ptr, out.size() * sizeof(int32_t));
  if (Status s = e.sync(); !s.ok()) return s.error();
  return out;
}

}  // namespace deepinfer::cuda
