#include <algorithm>
#include <cstdlib>

#include "backend/cuda/l2_ahead.cuh"

namespace deepinfer::cuda {
namespace {

constexpr int64_t kChunk = 8 * 1024;  // bytes per prefetch instruction
constexpr int kThreads = 128;

unsigned g_points = [] {
  const char* v = std::getenv("DEEPINFER_CUDA_L2_AHEAD");
  return v && *v ? static_cast<unsigned>(std::strtoul(v, nullptr, 10)) : 0u;
}();

struct ChunkedSpans {
  const uint8_t* p[L2Spans::kMax];
  int64_t bytes[L2Spans::kMax];
  int64_t first[L2Spans::kMax + 1];  // span s's first chunk; first[count] = all chunks
  int count;
};

__global__ void __launch_bounds__(kThreads) l2_prefetch_kernel(ChunkedSpans s) {
  pdl_begin();
  const int64_t total = s.first[s.count];
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads;
  int span = 0;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; c < total;
       c += step) {
    while (c >= s.first[span + 1]) ++span;
    const int64_t off = (c - s.first[span]) * kChunk;
    const int64_t left = s.bytes[span] - off;
    const auto len = static_cast<uint32_t>(left < kChunk ? left : kChunk);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(s.p[span] + off), "r"(len)
                 : "memory");
#endif
  }
}

}  // namespace

unsigned l2_ahead_points() { return g_points; }
void set_l2_ahead_points(unsigned mask) { g_points = mask; }

int64_t l2_ahead_budget(int64_t l2_bytes) {
  const char* v = std::getenv("DEEPINFER_CUDA_L2_AHEAD_MB");
  if (v && *v) return std::max<int64_t>(0, std::strtoll(v, nullptr, 10)) << 20;
  return l2_bytes / 4 * 3;
}

void L2Spans::add(const void* ptr, int64_t n) {
  if (full() || !ptr || n <= 0) return;
  const auto a = reinterpret_cast<uintptr_t>(ptr);
  const uintptr_t lo = (a + 15) & ~uintptr_t{15};
  const uintptr_t hi = (a + static_cast<uintptr_t>(n)) & ~uintptr_t{15};
  if (hi <= lo) return;
  const int64_t len = std::min<int64_t>(static_cast<int64_t>(hi - lo), (budget - total) & ~15);
  if (len <= 0) return;
  p[count] = reinterpret_cast<const uint8_t*>(lo);
  bytes[count++] = len;
  total += len;
}

void L2Spans::add(const DevWeight& w) {
  if (w.out <= 0) return;
  const int64_t elem = w.format == DevFormat::F32 ? 4 : w.format == DevFormat::BF16 ? 2 : 1;
  const int64_t row_bytes = w.format == DevFormat::FP4 ? w.stride / 2 : w.stride * elem;
  add(w.data + w.row0 * row_bytes, w.out * row_bytes);
  if (!w.quantized() || !w.scale) return;
  // FP8 has a scale row per block_out rows, FP4 one per row (DevWeight::at).
  const int64_t bo = w.format == DevFormat::FP4 ? 1 : std::max(1, w.block_out);
  const int64_t s0 = w.row0 / bo, s1 = (w.row0 + w.out + bo - 1) / bo;
  const int64_t sb = w.scale_f32 ? 4 : 1;
  add(w.scale + s0 * w.scale_stride * sb, (s1 - s0) * w.scale_stride * sb);
}

void l2_prefetch(Exec& e, const L2Spans& spans) {
  if (e.emulate || spans.count == 0) return;
  ChunkedSpans s{};
  s.count = spans.count;
  s.first[0] = 0;
  for (int i = 0; i < spans.count; ++i) {
    s.p[i] = spans.p[i];
    s.bytes[i] = spans.bytes[i];
    s.first[i + 1] = s.first[i] + (spans.bytes[i] + kChunk - 1) / kChunk;
  }
  const int64_t chunks = s.first[s.count];
  // A chunk a thread, on at most 64 SMs (each SM's copy engine issues its own requests).
  const auto blocks =
      static_cast<unsigned>(std::clamp<int64_t>((chunks + kThreads - 1) / kThreads, 1, 64));
  e.launch(l2_prefetch_kernel, blocks, kThreads, 0, s);
}

}  // namespace deepinfer::cuda
