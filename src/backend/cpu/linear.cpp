// Linear kernels for F32 and BF16 weights (GEMV for few rows, blocked sgemm for many) and the
// format dispatch table that the quantized kernels register into.
// GCC 12 reports its own _mm512_undefined_* helpers as uninitialized when inlined (a known
// false positive); the AVX-512 kernels below are otherwise warning-clean.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <vector>

#include "backend/cpu/simd.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/weight_view.h"

namespace deepinfer::cpu {
namespace {

constexpr int kMaxGemvRows = 4;       // x rows sharing one pass over the weights
constexpr int64_t kGemmMinRows = 12;  // from here on: fp32 block + sgemm
constexpr int64_t kGemmBlock = 64;    // output rows converted per sgemm call

inline float hsum256(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(
      _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}
inline float load1(const float* p) { return load_f32(p); }
inline float load1(const uint16_t* p) { return bf16_to_f32(load_u16(p)); }

// out[r] = dot(x[r], w[0:in]) for R rows, AVX2.
template <int R, class W>
void dot_avx2(const float* x, int64_t ldx, const W* w, int64_t in, float* out, int64_t ldo) {
  __m256 a0[R], a1[R];
  for (int r = 0; r < R; ++r) a0[r] = a1[r] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= in; k += 16) {
    const __m256 w0 = load8(w + k), w1 = load8(w + k + 8);
    for (int r = 0; r < R; ++r) {
      a0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * ldx + k), w0, a0[r]);
      a1[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * ldx + k + 8), w1, a1[r]);
    }
  }
  for (; k + 8 <= in; k += 8) {
    const __m256 w0 = load8(w + k);
    for (int r = 0; r < R; ++r)
      a0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * ldx + k), w0, a0[r]);
  }
  for (int r = 0; r < R; ++r) {
    float s = hsum256(_mm256_add_ps(a0[r], a1[r]));
    for (int64_t j = k; j < in; ++j) s += x[r * ldx + j] * load1(w + j);
    out[r * ldo] = s;
  }
}

__attribute__((target("avx512f,avx512bw"))) inline __m512 load16_512(const float* p) {
  return _mm512_loadu_ps(p);
}
__attribute__((target("avx512f,avx512bw"))) inline __m512 load16_512(const uint16_t* p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(
      _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}

template <int R, class W>
__attribute__((target("avx512f,avx512bw"))) void dot_avx512(const float* x, int64_t ldx, const W* w,
                                                            int64_t in, float* out, int64_t ldo) {
  __m512 a0[R], a1[R];
  for (int r = 0; r < R; ++r) a0[r] = a1[r] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) {
    const __m512 w0 = load16_512(w + k), w1 = load16_512(w + k + 16);
    for (int r = 0; r < R; ++r) {
      a0[r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * ldx + k), w0, a0[r]);
      a1[r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * ldx + k + 16), w1, a1[r]);
    }
  }
  for (; k + 16 <= in; k += 16) {
    const __m512 w0 = load16_512(w + k);
    for (int r = 0; r < R; ++r)
      a0[r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * ldx + k), w0, a0[r]);
  }
  for (int r = 0; r < R; ++r) {
    float s = _mm512_reduce_add_ps(_mm512_add_ps(a0[r], a1[r]));
    for (int64_t j = k; j < in; ++j) s += x[r * ldx + j] * load1(w + j);
    out[r * ldo] = s;
  }
}

template <class W, int R>
void gemv_rows(const float* x, int64_t in, const W* w, int64_t ws, float* y, int64_t out,
               int64_t o0, int64_t o1) {
  const bool wide = cpu_has_avx512();
  for (int64_t o = o0; o < o1; ++o) {
    if (wide) {
      dot_avx512<R>(x, in, w + o * ws, in, y + o, out);
    } else {
      dot_avx2<R>(x, in, w + o * ws, in, y + o, out);
    }
  }
}

template <class W>
void gemv_range(const float* x, int64_t n_rows, const WeightView& wv, float* y, int64_t o0,
                int64_t o1) {
  const W* w = static_cast<const W*>(wv.data);
  const int64_t in = wv.in, out = wv.out, ws = wv.stride();
  int64_t r = 0;
  for (; r + 4 <= n_rows; r += 4) gemv_rows<W, 4>(x + r * in, in, w, ws, y + r * out, out, o0, o1);
  switch (n_rows - r) {
    case 3:
      gemv_rows<W, 3>(x + r * in, in, w, ws, y + r * out, out, o0, o1);
      break;
    case 2:
      gemv_rows<W, 2>(x + r * in, in, w, ws, y + r * out, out, o0, o1);
      break;
    case 1:
      gemv_rows<W, 1>(x + r * in, in, w, ws, y + r * out, out, o0, o1);
      break;
    default:
      break;
  }
}

void f32_range(const float* x, int64_t n_rows, const WeightView& w, float* y, int64_t o0,
               int64_t o1) {
  gemv_range<float>(x, n_rows, w, y, o0, o1);
}
void bf16_range(const float* x, int64_t n_rows, const WeightView& w, float* y, int64_t o0,
                int64_t o1) {
  gemv_range<uint16_t>(x, n_rows, w, y, o0, o1);
}

std::array<LinearRangeFn, 4>& kernel_table() {
  static std::array<LinearRangeFn, 4> table{f32_range, bf16_range, nullptr, nullptr};
  return table;
}

std::array<DequantizeRowFn, 4>& row_decoders() {
  static std::array<DequantizeRowFn, 4> table{};
  return table;
}

void init_blas_once() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

// Many rows, dense weights: sgemm per block of output rows (bf16 blocks converted first).
void gemm_dense(const float* x, int64_t n, const WeightView& w, float* y, ThreadPool* pool) {
  init_blas_once();
  const int64_t blocks = (w.out + kGemmBlock - 1) / kGemmBlock;
  parallel_for(pool, blocks, 1, [&](int64_t b0, int64_t b1) {
    thread_local std::vector<float> scratch;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t o0 = b * kGemmBlock, rows = std::min(kGemmBlock, w.out - o0);
      const float* wp;
      int64_t ldw;
      if (w.format == WeightFormat::F32) {
        wp = static_cast<const float*>(w.data) + o0 * w.stride();
        ldw = w.stride();
      } else {
        scratch.resize(static_cast<size_t>(rows * w.in));
        for (int64_t r = 0; r < rows; ++r) dequantize_row(w, o0 + r, scratch.data() + r * w.in);
        wp = scratch.data();
        ldw = w.in;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n),
                  static_cast<int>(rows), static_cast<int>(w.in), 1.0f, x, static_cast<int>(w.in),
                  wp, static_cast<int>(ldw), 0.0f, y + o0, static_cast<int>(w.out));
    }
  });
}

}  // namespace

WeightView WeightView::rows(int64_t r0, int64_t n) const {
  WeightView v = *this;
  v.out = n;
  v.row_stride = stride();
  switch (format) {
    case WeightFormat::F32:
      v.data = static_cast<const float*>(data) + r0 * stride();
      break;
    case WeightFormat::BF16:
      v.data = static_cast<const uint16_t*>(data) + r0 * stride();
      break;
    case WeightFormat::FP8_E4M3_BLOCK:
      v.data = static_cast<const uint8_t*>(data) + r0 * stride();
      if (scale) {
        const int64_t srow = r0 / block_out;
        v.scale = static_cast<const uint8_t*>(scale) +
                  srow * scale_stride * (scale_format == ScaleFormat::F32 ? 4 : 1);
      }
      break;
    case WeightFormat::FP4_E2M1_BLOCK32:
      v.data = static_cast<const uint8_t*>(data) + r0 * stride() / 2;
      if (scale) {
        v.scale = static_cast<const uint8_t*>(scale) +
                  r0 * scale_stride * (scale_format == ScaleFormat::F32 ? 4 : 1);
      }
      break;
  }
  return v;
}

void register_linear_kernel(WeightFormat format, LinearRangeFn fn) {
  kernel_table()[static_cast<size_t>(format)] = fn;
}

bool linear_supported(WeightFormat format) {
  return kernel_table()[static_cast<size_t>(format)] != nullptr;
}

void linear(const float* x, int64_t n_rows, const WeightView& w, float* y, ThreadPool* pool) {
  if (n_rows <= 0 || w.out <= 0) return;
  const bool dense = w.format == WeightFormat::F32 || w.format == WeightFormat::BF16;
  if (dense && n_rows >= kGemmMinRows && w.in >= 16) {
    gemm_dense(x, n_rows, w, y, pool);
    return;
  }
  LinearRangeFn fn = kernel_table()[static_cast<size_t>(w.format)];
  if (!fn) return;  // checked at load time (linear_supported)
  // Column chunks of ≥ 16 rows and ≥ 64K multiply-adds per task: waking a worker costs more
  // than a small product.
  const int64_t grain =
      std::max<int64_t>(16, (int64_t{1} << 16) / std::max<int64_t>(1, w.in * n_rows));
  parallel_for(pool, w.out, grain, [&](int64_t o0, int64_t o1) { fn(x, n_rows, w, y, o0, o1); });
}

void dequantize_row(const WeightView& w, int64_t r, float* out) {
  switch (w.format) {
    case WeightFormat::F32:
      std::memcpy(out, static_cast<const float*>(w.data) + r * w.stride(), w.in * sizeof(float));
      return;
    case WeightFormat::BF16:
      bf16_to_f32_row(static_cast<const uint16_t*>(w.data) + r * w.stride(), out, w.in);
      return;
    default: {
      DequantizeRowFn fn = row_decoders()[static_cast<size_t>(w.format)];
      if (fn) {
        fn(w, r, out);
      } else {
        std::fill(out, out + w.in, 0.0f);
      }
      return;
    }
  }
}

void register_dequantize_row(WeightFormat format, DequantizeRowFn fn) {
  row_decoders()[static_cast<size_t>(format)] = fn;
}

const char* to_string(WeightFormat format) {
  switch (format) {
    case WeightFormat::F32:
      return "F32";
    case WeightFormat::BF16:
      return "BF16";
    case WeightFormat::FP8_E4M3_BLOCK:
      return "FP8_E4M3_BLOCK";
    case WeightFormat::FP4_E2M1_BLOCK32:
      return "FP4_E2M1_BLOCK32";
  }
  return "?";
}

}  // namespace deepinfer::cpu
