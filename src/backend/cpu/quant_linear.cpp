// GCC 12 reports its own _mm512_undefined_* helpers as uninitialized when inlined (a known false
// positive, as in linear.cpp).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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
  if (w.scale_format == ScaleFormat::F32) {  // checkpoints need not align F32 tensors
    float v;
    std::memcpy(&v, static_cast<const uint8_t*>(w.scale) + i * 4, 4);
    return v;
  }
  return ue8m0_to_float(static_cast<const uint8_t*>(w.scale)[i]);
}

// 8 e4m3 codes → fp32 via the exponent shift: the sign-extended code shifted to bits 20..27, with
// bits 27..30 masked off, is the value times 2^-120 (normals and subnormals alike; NaN codes read
// as ±480 here). `mul` is 2^120 · scale (e4m3_mul) so one multiply finishes the decode.
inline __m256 e4m3x8(const uint8_t* p, __m256 mul) {
  int64_t raw;
  std::memcpy(&raw, p, 8);
  const __m256i c = _mm256_slli_epi32(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(raw)), 20);
  const __m256i bits = _mm256_and_si256(c, _mm256_set1_epi32(static_cast<int>(0x87f00000u)));
  return _mm256_mul_ps(_mm256_castsi256_ps(bits), mul);
}

// The multiplier for e4m3x8: 2^120 · s, finite for scales up to 2^7 (block scales of real
// weights are far below 1; larger ones take the scalar path).
inline __m256 e4m3_mul(float s) { return _mm256_set1_ps(s * 0x1p120f); }
inline bool e4m3_fast_scale(float s) { return s <= 0x1p7f; }

// Row r of an FP8 view, scales applied, into dst[in]. exact_nan: decode NaN codes as NaN.
void fp8_row(const WeightView& w, int64_t r, float* dst, bool exact_nan) {
  const uint8_t* q = static_cast<const uint8_t*>(w.data) + r * w.stride();
  const int64_t srow = r / w.block_out;
  for (int64_t k0 = 0, j = 0; k0 < w.in; k0 += w.block_in, ++j) {
    const int64_t k1 = std::min<int64_t>(w.in, k0 + w.block_in);
    const float s = scale_at(w, srow, j);
    int64_t k = k0;
    if (!exact_nan && e4m3_fast_scale(s)) {
      const __m256 mul = e4m3_mul(s);
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

inline float hsum8(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// 8 FP4 values of a packed row starting at an even element k (4 bytes), times mul.
inline __m256 e2m1x8(const uint8_t* row, int64_t k, __m256 table, __m256i shifts, __m256 mul) {
  uint32_t four;
  std::memcpy(&four, row + k / 2, 4);
  const __m256i nib = _mm256_and_si256(
      _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(four)), shifts), _mm256_set1_epi32(15));
  const __m256 mag = _mm256_permutevar8x32_ps(table, nib);
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(nib, _mm256_set1_epi32(8)), 28);
  return _mm256_mul_ps(_mm256_or_ps(mag, _mm256_castsi256_ps(sign)), mul);
}

// Decode (few rows): out[r·ldo] = x[r] · W[o] for R rows, decoding W[o] on the fly into
// registers. Needs in and the scale block a multiple of 16. Scales are folded into the weights
// (powers of two for UE8M0, so every product equals the reference's block-scaled one).
template <int R, bool Fp4>
void gemv_fused(const float* x, int64_t in, const WeightView& w, int64_t o, float* out,
                int64_t ldo) {
  __m256 a0[R], a1[R];
  for (int r = 0; r < R; ++r) a0[r] = a1[r] = _mm256_setzero_ps();
  const __m256 table = _mm256_loadu_ps(kFp4E2m1Values);
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const uint8_t* q =
      static_cast<const uint8_t*>(w.data) + (Fp4 ? o * w.stride() / 2 : o * w.stride());
  const int64_t blk = Fp4 ? 32 : w.block_in;
  for (int64_t k0 = 0, j = 0; k0 < in; k0 += blk, ++j) {
    const float sc = Fp4 ? scale_at(w, o, j) : scale_at(w, o / w.block_out, j);
    const __m256 mul = Fp4 ? _mm256_set1_ps(sc) : e4m3_mul(sc);
    const int64_t k1 = std::min(in, k0 + blk);
    if (!Fp4 && !e4m3_fast_scale(sc)) {
      for (int r = 0; r < R; ++r) {
        float part = 0.0f;
        for (int64_t k = k0; k < k1; ++k) part += x[r * in + k] * (fp8_e4m3_to_float(q[k]) * sc);
        a0[r] = _mm256_add_ps(a0[r], _mm256_setr_ps(part, 0, 0, 0, 0, 0, 0, 0));
      }
      continue;
    }
    for (int64_t k = k0; k < k1; k += 16) {
      const __m256 w0 = Fp4 ? e2m1x8(q, k, table, shifts, mul) : e4m3x8(q + k, mul);
      const __m256 w1 = Fp4 ? e2m1x8(q, k + 8, table, shifts, mul) : e4m3x8(q + k + 8, mul);
      for (int r = 0; r < R; ++r) {
        a0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * in + k), w0, a0[r]);
        a1[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * in + k + 8), w1, a1[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r * ldo] = hsum8(_mm256_add_ps(a0[r], a1[r]));
}

// 16 weights from element k of a row (FP8 codes, or FP4 pairs: 8 bytes), times mul.
template <bool Fp4>
__attribute__((target("avx512f,avx512bw"))) inline __m512 weights16(const uint8_t* q, int64_t k,
                                                                    __m512 mul) {
  if constexpr (Fp4) {
    const __m512i pairs = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512i shifts = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
    int64_t raw;
    std::memcpy(&raw, q + k / 2, 8);
    const __m512i bytes =
        _mm512_permutexvar_epi32(pairs, _mm512_cvtepu8_epi32(_mm_cvtsi64_si128(raw)));
    const __m512i nib = _mm512_and_si512(_mm512_srlv_epi32(bytes, shifts), _mm512_set1_epi32(15));
    return _mm512_mul_ps(_mm512_permutexvar_ps(nib, _mm512_loadu_ps(kFp4E2m1Values)), mul);
  } else {
    const __m512i c = _mm512_slli_epi32(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + k))), 20);
    const __m512i bits = _mm512_and_si512(c, _mm512_set1_epi32(static_cast<int>(0x87f00000u)));
    return _mm512_mul_ps(_mm512_castsi512_ps(bits), mul);
  }
}

// The same with AVX-512 (16 weights per step, two accumulators per row); needs in and the scale
// block a multiple of 32. FP4 nibbles index the 16-entry signed value table directly.
template <int R, bool Fp4>
__attribute__((target("avx512f,avx512bw"))) void gemv_fused512(const float* x, int64_t in,
                                                               const WeightView& w, int64_t o,
                                                               float* out, int64_t ldo) {
  __m512 a0[R], a1[R];
  for (int r = 0; r < R; ++r) a0[r] = a1[r] = _mm512_setzero_ps();
  const uint8_t* q =
      static_cast<const uint8_t*>(w.data) + (Fp4 ? o * w.stride() / 2 : o * w.stride());
  const int64_t blk = Fp4 ? 32 : w.block_in;
  for (int64_t k0 = 0, j = 0; k0 < in; k0 += blk, ++j) {
    const float sc = Fp4 ? scale_at(w, o, j) : scale_at(w, o / w.block_out, j);
    const int64_t k1 = std::min(in, k0 + blk);
    if (!Fp4 && !e4m3_fast_scale(sc)) {
      for (int r = 0; r < R; ++r) {
        float part = 0.0f;
        for (int64_t k = k0; k < k1; ++k) part += x[r * in + k] * (fp8_e4m3_to_float(q[k]) * sc);
        a0[r] = _mm512_add_ps(a0[r], _mm512_maskz_mov_ps(1, _mm512_set1_ps(part)));
      }
      continue;
    }
    const __m512 mul = _mm512_set1_ps(Fp4 ? sc : sc * 0x1p120f);
    for (int64_t k = k0; k < k1; k += 32) {
      const __m512 w0 = weights16<Fp4>(q, k, mul), w1 = weights16<Fp4>(q, k + 16, mul);
      for (int r = 0; r < R; ++r) {
        a0[r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * in + k), w0, a0[r]);
        a1[r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * in + k + 16), w1, a1[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r * ldo] = _mm512_reduce_add_ps(_mm512_add_ps(a0[r], a1[r]));
}

template <bool Fp4>
void gemv_fused_rows(const float* x, int64_t n_rows, const WeightView& w, float* y, int64_t o0,
                     int64_t o1, bool bf16_out) {
  const int64_t in = w.in, out = w.out;
  const bool wide = cpu_has_avx512() && in % 32 == 0 && (Fp4 ? 32 : w.block_in) % 32 == 0;
  for (int64_t o = o0; o < o1; ++o) {
    int64_t r = 0;
    if (wide) {
      for (; r + 4 <= n_rows; r += 4)
        gemv_fused512<4, Fp4>(x + r * in, in, w, o, y + r * out + o, out);
      switch (n_rows - r) {
        case 3:
          gemv_fused512<3, Fp4>(x + r * in, in, w, o, y + r * out + o, out);
          break;
        case 2:
          gemv_fused512<2, Fp4>(x + r * in, in, w, o, y + r * out + o, out);
          break;
        case 1:
          gemv_fused512<1, Fp4>(x + r * in, in, w, o, y + r * out + o, out);
          break;
        default:
          break;
      }
      r = n_rows;
    }
    for (; r + 4 <= n_rows; r += 4) gemv_fused<4, Fp4>(x + r * in, in, w, o, y + r * out + o, out);
    switch (n_rows - r) {
      case 3:
        gemv_fused<3, Fp4>(x + r * in, in, w, o, y + r * out + o, out);
        break;
      case 2:
        gemv_fused<2, Fp4>(x + r * in, in, w, o, y + r * out + o, out);
        break;
      case 1:
        gemv_fused<1, Fp4>(x + r * in, in, w, o, y + r * out + o, out);
        break;
      default:
        break;
    }
    if (bf16_out) {
      for (int64_t i = 0; i < n_rows; ++i) y[i * out + o] = round_bf16(y[i * out + o]);
    }
  }
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
  const int64_t blk = fp4 ? 32 : w.block_in;
  if (in % 16 == 0 && blk % 16 == 0) {
    if (fp4) {
      gemv_fused_rows<true>(xs, n_rows, w, y, o0, o1, official);
    } else {
      gemv_fused_rows<false>(xs, n_rows, w, y, o0, o1, official);
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
