#include "backend/cpu/quant_linear.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include "backend/cpu/fp4.h"
#include "backend/cpu/fp8.h"
#include "backend/cpu/quant_act.h"
#include "backend/cpu/simd.h"

namespace deepinfer::cpu {
namespace {

constexpr int kActBlock = 128;        // FP8 activation quantization block along K
constexpr int64_t kGemmMinRows = 12;  // from here on: dequantized row blocks + sgemm
constexpr int64_t kGemmBlock = 64;    // weight rows dequantized per sgemm call

float scale_at(const WeightView& w, int64_t srow, int64_t scol) {
  const int64_t i = srow * w.scale_stride + scol;
  if (w.scale_format == ScaleFormat::F32) return static_cast<const float*>(w.scale)[i];
  return ue8m0_to_float(static_cast<const uint8_t*>(w.scale)[i]);
}

// 8 e4m3 codes → fp32 via the exponent shift: the code's 7 low bits placed at fp32 bits 20..26
// are the value times 2^-120 (normals and subnormals alike); NaN codes read as ±480 here.
inline __m256 e4m3x8(const uint8_t* p, __m256 mul) {
  int64_t raw;
  std::memcpy(&raw, p, 8);
  const __m256i c = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(raw));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(0x80)), 24);
  const __m256i mag = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(0x7f)), 20);
  const __m256 v = _mm256_castsi256_ps(_mm256_or_si256(sign, mag));
  return _mm256_mul_ps(_mm256_mul_ps(v, _mm256_set1_ps(0x1p120f)), mul);
}

// Row r of an FP8 view, scales applied, into dst[in]. exact_nan: decode NaN codes as NaN.
void fp8_row(const WeightView& w, int64_t r, float* dst, bool exact_nan) {
  const uint8_t* q = static_cast<const uint8_t*>(w.data) + r * w.stride();
  const int64_t srow = r / w.block_out;
  for (int64_t k0 = 0, j = 0; k0 < w.in; k0 += w.block_in, ++j) {
    const int64_t k1 = std::min<int64_t>(w.in, k0 + w.block_in);
    const float s = scale_at(w, srow, j);
    int64_t k = k0;
    if (!exact_nan) {
      const __m256 mul = _mm256_set1_ps(s);
      for (; k + 8 <= k1; k += 8) _mm256_storeu_ps(dst + k, e4m3x8(q + k, mul));
    }
    for (; k < k1; ++k) dst[k] = fp8_e4m3_to_float(q[k]) * s;
  }
}

// Row r of an FP4 view (bytes hold elements 2k low, 2k+1 high), per-32 scales applied.
void fp4_row(const WeightView& w, int64_t r, float* dst) {
  const uint8_t* q = static_cast<const uint8_t*>(w.data) + r * w.stride() / 2;
  const int64_t sblk = w.block_in > 0 ? w.block_in : 32;
  const __m256 table = _mm256_loadu_ps(kFp4E2m1Values);
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  for (int64_t k0 = 0, j = 0; k0 < w.in; k0 += sblk, ++j) {
    const int64_t k1 = std::min<int64_t>(w.in, k0 + sblk);
    const float s = scale_at(w, r, j);
    const __m256 mul = _mm256_set1_ps(s);
    int64_t k = k0;
    for (; k + 8 <= k1; k += 8) {  // 4 bytes → 8 nibbles, in element order
      uint32_t four;
      std::memcpy(&four, q + k / 2, 4);
      const __m256i nib =
          _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(four)), shifts),
                           _mm256_set1_epi32(15));
      const __m256 mag = _mm256_permutevar8x32_ps(table, nib);  // index & 7
      const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(nib, _mm256_set1_epi32(8)), 28);
      const __m256 v = _mm256_or_ps(mag, _mm256_castsi256_ps(sign));
      _mm256_storeu_ps(dst + k, _mm256_mul_ps(v, mul));
    }
    for (; k < k1; ++k) dst[k] = fp4_packed_at(q, k) * s;
  }
}

// Σ over K blocks of kb of the block dot products, added in K order.
inline float blocked_dot(const float* x, const float* w, int64_t n, int64_t kb) {
  float total = 0.0f;
  for (int64_t k0 = 0; k0 < n; k0 += kb) total += dot(x + k0, w + k0, std::min(kb, n - k0));
  return total;
}

struct Scratch {
  std::vector<float> xq, wrow, yblk;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

std::atomic<int> g_mode{static_cast<int>(QuantActivations::Official)};

void registered_range(const float* x, int64_t n_rows, const WeightView& w, float* y, int64_t o0,
                      int64_t o1) {
  quant_linear_range(x, n_rows, w, y, o0, o1, static_cast<QuantActivations>(g_mode.load()));
}

}  // namespace

void quant_linear_range(const float* x, int64_t n_rows, const WeightView& w, float* y, int64_t o0,
                        int64_t o1, QuantActivations mode) {
  const bool official = mode == QuantActivations::Official;
  const bool fp4 = w.format == WeightFormat::FP4_E2M1_BLOCK32;
  const int64_t in = w.in;
  Scratch& s = scratch();
  const float* xs = x;
  if (official && w.quantize_input) {
    s.xq.resize(static_cast<size_t>(n_rows * in));
    std::memcpy(s.xq.data(), x, sizeof(float) * static_cast<size_t>(n_rows * in));
    for (int64_t r = 0; r < n_rows; ++r) fp8_act_quant_inplace(s.xq.data() + r * in, in, kActBlock);
    xs = s.xq.data();
  }
  if (n_rows >= kGemmMinRows) {
    // Prefill: blocks of weight rows dequantized to fp32, one sgemm each. The products are the
    // same as the K-blocked sums below; only the fp32 summation order differs.
    static std::once_flag blas_once;
    std::call_once(blas_once, [] { openblas_set_num_threads(1); });
    s.wrow.resize(static_cast<size_t>(kGemmBlock * in));
    s.yblk.resize(static_cast<size_t>(kGemmBlock * n_rows));
    for (int64_t b0 = o0; b0 < o1; b0 += kGemmBlock) {
      const int64_t rows = std::min(kGemmBlock, o1 - b0);
      for (int64_t o = 0; o < rows; ++o) {
        if (fp4) {
          fp4_row(w, b0 + o, s.wrow.data() + o * in);
        } else {
          fp8_row(w, b0 + o, s.wrow.data() + o * in, false);
        }
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n_rows),
                  static_cast<int>(rows), static_cast<int>(in), 1.0f, xs, static_cast<int>(in),
                  s.wrow.data(), static_cast<int>(in), 0.0f, s.yblk.data(), static_cast<int>(rows));
      for (int64_t r = 0; r < n_rows; ++r) {
        for (int64_t o = 0; o < rows; ++o) {
          const float v = s.yblk[static_cast<size_t>(r * rows + o)];
          y[r * w.out + b0 + o] = official ? round_bf16(v) : v;
        }
      }
    }
    return;
  }
  s.wrow.resize(static_cast<size_t>(in));
  float* wrow = s.wrow.data();
  const int64_t kb = official ? (fp4 ? 32 : kActBlock) : in;
  for (int64_t o = o0; o < o1; ++o) {
    if (fp4) {
      fp4_row(w, o, wrow);
    } else {
      fp8_row(w, o, wrow, false);
    }
    for (int64_t r = 0; r < n_rows; ++r) {
      const float v = blocked_dot(xs + r * in, wrow, in, kb);
      y[r * w.out + o] = official ? round_bf16(v) : v;
    }
  }
}

void quant_dequantize_row(const WeightView& w, int64_t r, float* out) {
  if (w.format == WeightFormat::FP4_E2M1_BLOCK32) {
    fp4_row(w, r, out);
  } else {
    fp8_row(w, r, out, true);
  }
}

void register_quant_kernels(QuantActivations mode) {
  g_mode.store(static_cast<int>(mode));
  register_linear_kernel(WeightFormat::FP8_E4M3_BLOCK, registered_range);
  register_linear_kernel(WeightFormat::FP4_E2M1_BLOCK32, registered_range);
  register_dequantize_row(WeightFormat::FP8_E4M3_BLOCK, quant_dequantize_row);
  register_dequantize_row(WeightFormat::FP4_E2M1_BLOCK32, quant_dequantize_row);
}

}  // namespace deepinfer::cpu
