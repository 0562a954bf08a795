// Reference bodies of the forward's operations (one thread per output element or per row), run on
// the device or, emulated, on the host. The fast decode kernels live in gemv.cu.
#include "backend/cuda/cuda_model.h"
#include "backend/cuda/fast_ops.cuh"
#include "backend/cuda/gemm_lt.cuh"
#include "backend/cuda/gemm_narrow.cuh"
#include "backend/cuda/gemm_short.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/ops.cuh"

namespace deepinfer::cuda {

namespace {

DI_HD inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

// One row's FP8 activation quantization in place, blocks of `block`.
DI_HD inline void fp8_quant_row(float* v, int64_t dim, int block) {
  for (int64_t b0 = 0; b0 < dim; b0 += block) {
    const int64_t len = dim - b0 < block ? dim - b0 : block;
    float amax = 0.0f;
    for (int64_t i = 0; i < len; ++i) amax = fmaxf(amax, fabsf(v[b0 + i]));
    const float s = fp8_act_scale(amax);
    for (int64_t i = 0; i < len; ++i) v[b0 + i] = bf16r(round_e4m3(v[b0 + i] / s) * s);
  }
}

}  // namespace

void fp8_quant_rows(Exec& e, float* x, int64_t rows, int64_t dim, int block) {
  if (!e.emulate && fast_kernels()) {
    fp8_quant_rows_fast(e, x, rows, dim, block);
    return;
  }
  const int64_t blocks = (dim + block - 1) / block;
  e.each(rows * blocks, [=] DI_HD(int64_t i) {
    const int64_t r = i / blocks, b = i % blocks;
    const int64_t b0 = b * block;
    const int64_t len = dim - b0 < block ? dim - b0 : block;
    fp8_quant_row(x + r * dim + b0, len, block);
  });
}

void fp8_quant_rows_from(Exec& e, const float* src, int64_t ld, int64_t rows, int64_t dim,
                         int block, float* dst) {
  if (!e.emulate && fast_kernels()) {
    fp8_quant_rows_from_fast(e, src, ld, rows, dim, block, dst);
    return;
  }
  e.each(rows * dim, [=] DI_HD(int64_t i) { dst[i] = src[(i / dim) * ld + i % dim]; });
  fp8_quant_rows(e, dst, rows, dim, block);
}

void round_bf16(Exec& e, float* x, int64_t n) {
  e.each(n, [=] DI_HD(int64_t i) { x[i] = bf16r(x[i]); });
}

void scale_values(Exec& e, float* x, int64_t n, float s) {
  e.each(n, [=] DI_HD(int64_t i) { x[i] *= s; });
}

void scale_values_bf16(Exec& e, float* x, int64_t n, float s) {
  e.each(n, [=] DI_HD(int64_t i) { x[i] = bf16r(bf16r(x[i]) * s); });
}

void linear(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w, float* y,
            int64_t ldy, bool official, float* xq, const float* xq_ready) {
  const bool quant = official && w.quantized();
  const bool invariant = batch_invariant();
  // Past the GEMV passes (or, batch-invariant, at every row count) the tensor-core products.
  const bool big = !e.emulate && fast_kernels() && n > gemv_max_rows();
  if (!e.emulate && fast_kernels() && lt_gemm() && (big || invariant) &&
      lt_linear(e, x, ldx, n, w, y, ldy, official))
    return;
  if (quant && w.quantize_input) {
    if (!xq_ready) fp8_quant_rows_from(e, x, ldx, n, w.in, 128, xq);
    x = xq_ready ? xq_ready : xq;
    ldx = w.in;
  }
  // Few outputs over long rows at decode batch sizes (the mHC mixes, narrow weights cuBLASLt
  // declined): K split over a cluster of blocks, so the launch fills the GPU.
  if (big && !invariant && narrow_preferred(w, n) && narrow_supported(w, n, x, ldx)) {
    gemm_narrow(e, x, ldx, n, w, y, ldy, quant);
    return;
  }
  // Few fp32 outputs over long rows (the mHC mixes): blocks of 16 rows, not one tile column.
  if (big && !invariant && short_out_supported(w)) {
    gemm_short_out(e, x, ldx, n, w, y, ldy);
    return;
  }
  // The WMMA tiles are exact for quantized weights on bf16-exact inputs; past the GEMV passes they
  // take what cuBLASLt does not (inputs rounded to bf16 by the caller, FP4 weights) — unless the
  // same product runs on cuBLASLt with the weight dequantized to bf16 (gemm_lt.cuh).
  if (!e.emulate && fast_kernels() && quant && n > 8 && !invariant &&
      (tensor_cores() || (big && lt_gemm()))) {
    if (big && lt_gemm() && lt_dequant_linear(e, x, ldx, n, w, y, ldy, lt_dequant())) return;
    gemm_tc(e, x, ldx, n, w, y, ldy, quant);
    return;
  }
  if (!e.emulate && gemv_supported(w, n)) {
    gemv(e, x, ldx, n, w, y, ldy, quant);
    return;
  }
  const int64_t out = w.out, in = w.in;
  const DevWeight wv = w;
  const bool fp4_blocks = quant && w.format == DevFormat::FP4;
  e.each(n * out, [=] DI_HD(int64_t i) {
    const int64_t r = i / out, o = i % out;
    const float* xr = x + r * ldx;
    float acc = 0.0f;
    if (fp4_blocks) {  // K in blocks of 32, as the reference FP4 GEMM
      for (int64_t k0 = 0; k0 < in; k0 += 32) {
        float part = 0.0f;
        for (int64_t k = k0; k < k0 + 32 && k < in; ++k) part += xr[k] * wv.at(o, k);
        acc += part;
      }
    } else {
      for (int64_t k = 0; k < in; ++k) acc += xr[k] * wv.at(o, k);
    }
    y[r * ldy + o] = quant ? bf16r(acc) : acc;
  });
}

void linear_experts(Exec& e, const float* x, bool x_per_slot, int64_t n_slots, int K,
                    const DevWeight* experts, const int32_t* idx, float* y, int64_t ldy,
                    int64_t out, int64_t in, bool official, bool quantize_x, DevFormat format,
                    float* xq) {
  // Quantized experts take FP8-quantized inputs (per 1×128) in the official numerics.
  const int64_t xrows = x_per_slot ? n_slots : n_slots / K;
  if (quantize_x) {
    e.each(xrows * in, [=] DI_HD(int64_t i) { xq[i] = x[i]; });
    fp8_quant_rows(e, xq, xrows, in, 128);
    x = xq;
  }
  if (!e.emulate && gemv_experts_supported(n_slots, in)) {
    gemv_experts(e, x, x_per_slot, n_slots, K, experts, idx, y, ldy, out, in, official, format);
    return;
  }
  e.each(n_slots * out, [=] DI_HD(int64_t i) {
    const int64_t s = i / out, o = i % out;
    const DevWeight& w = experts[idx[s]];
    const float* xr = x + (x_per_slot ? s : s / K) * in;
    const bool quant = official && w.quantized();
    const bool fp4_blocks = quant && w.format == DevFormat::FP4;
    float acc = 0.0f;
    if (fp4_blocks) {
      for (int64_t k0 = 0; k0 < in; k0 += 32) {
        float part = 0.0f;
        for (int64_t k = k0; k < k0 + 32 && k < in; ++k) part += xr[k] * w.at(o, k);
        acc += part;
      }
    } else {
      for (int64_t k = 0; k < in; ++k) acc += xr[k] * w.at(o, k);
    }
    y[s * ldy + o] = quant ? bf16r(acc) : acc;
  });
}

void rms_norm(Exec& e, const float* x, int64_t rows, int64_t dim, const float* w, float eps,
              float* y, bool round_in, bool round_out) {
  if (!e.emulate && fast_kernels() && dim >= 256) {
    rms_norm_fast(e, x, rows, dim, w, eps, y, round_in, round_out);
    return;
  }
  e.each(rows, [=] DI_HD(int64_t r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    auto at = [&](int64_t i) { return round_in ? bf16r(xr[i]) : xr[i]; };
    float ss = 0.0f;
    for (int64_t i = 0; i < dim; ++i) ss += at(i) * at(i);
    const float s = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) {
      const float v = w ? w[i] * (at(i) * s) : at(i) * s;
      yr[i] = round_out ? bf16r(v) : v;
    }
  });
}

void rms_norm_quant(Exec& e, const float* x, int64_t rows, int64_t dim, const float* w, float eps,
                    float* y, bool round_in, bool round_out, float* yq) {
  if (!e.emulate && fast_kernels() && dim >= 256) {
    rms_norm_quant_fast(e, x, rows, dim, w, eps, y, round_in, round_out, yq);
    return;
  }
  rms_norm(e, x, rows, dim, w, eps, y, round_in, round_out);
  fp8_quant_rows_from(e, y, dim, rows, dim, 128, yq);
}

void kv_norm_rope_official(Exec& e, float* kv, int64_t rows, int head_dim, int rope_dim,
                           const float* w, float eps, const RopeRows& rr) {
  if (!e.emulate && fast_kernels() && fast_ops() &&
      kv_norm_rope_official_fast(e, kv, rows, head_dim, rope_dim, w, eps, rr))
    return;
  rms_norm(e, kv, rows, head_dim, w, eps, kv, false, true);
  rope(e, kv, rows, 1, head_dim, rr.pairs, rr.inv_freq, rr.attention_factor, rr.pos, false);
  kv_rows_official(e, kv, rows, head_dim, rope_dim);
}

void q_head_norm_rope_official(Exec& e, float* q, int64_t rows, int64_t head_dim, float eps,
                               const RopeRows& rr) {
  if (!e.emulate && fast_kernels() && fast_ops() && head_dim <= 2048 &&
      q_head_norm_rope_fast(e, q, rows, head_dim, eps, rr))
    return;
  q_head_norm_official(e, q, rows, head_dim, eps);
  rope(e, q, rows / rr.per_row, rr.per_row, static_cast<int>(head_dim), rr.pairs, rr.inv_freq,
       rr.attention_factor, rr.pos, false);
}

void q_head_norm_official(Exec& e, float* q, int64_t rows, int64_t head_dim, float eps) {
  if (!e.emulate && fast_kernels() && fast_ops() && head_dim <= 2048) {
    q_head_norm_official_fast(e, q, rows, head_dim, eps);
    return;
  }
  e.each(rows, [=] DI_HD(int64_t r) {
    float* v = q + r * head_dim;
    float sum = 0.0f;
    for (int64_t i = 0; i < head_dim; ++i) {
      v[i] = bf16r(v[i]);
      sum += bf16r(v[i] * v[i]);
    }
    const float mean = bf16r(sum / static_cast<float>(head_dim));
    const float t = bf16r(mean + eps);
    const float rs = bf16r(1.0f / sqrtf(t));
    for (int64_t i = 0; i < head_dim; ++i) v[i] = bf16r(v[i] * rs);
  });
}

void rope(Exec& e, float* x, int64_t n, int per_row, int width, int pairs, const float* inv_freq,
          float attention_factor, const int32_t* pos, bool inverse) {
  e.each(n * per_row * pairs, [=] DI_HD(int64_t i) {
    const int64_t pr = i % pairs, v = (i / pairs) % per_row, r = i / (int64_t{pairs} * per_row);
    const float phi = inv_freq[pr] * static_cast<float>(pos[r]);
    const float c = cosf(phi) * attention_factor;
    float s = sinf(phi) * attention_factor;
    if (inverse) s = -s;
    float* xp = x + (r * per_row + v) * width + width - 2 * pairs + 2 * pr;
    const float2 y = rotate_pair(xp[0], xp[1], c, s);
    xp[0] = y.x;
    xp[1] = y.y;
  });
}

void rope_round_bf16(Exec& e, float* x, int64_t n, int per_row, int width, int pairs,
                     const float* inv_freq, float attention_factor, const int32_t* pos,
                     bool inverse) {
  const int half = width / 2, first = (width - 2 * pairs) / 2;  // the first rotated pair
  e.each(n * per_row * half, [=] DI_HD(int64_t i) {
    const int64_t vec = i / half, p2 = i % half;
    float* xp = x + vec * width + 2 * p2;
    if (p2 < first) {
      xp[0] = bf16r(xp[0]);
      xp[1] = bf16r(xp[1]);
      return;
    }
    const float phi = inv_freq[p2 - first] * static_cast<float>(pos[vec / per_row]);
    const float c = cosf(phi) * attention_factor;
    float s = sinf(phi) * attention_factor;
    if (inverse) s = -s;
    const float2 y = rotate_pair(xp[0], xp[1], c, s);
    xp[0] = bf16r(y.x);
    xp[1] = bf16r(y.y);
  });
}

void kv_rows_official(Exec& e, float* kv, int64_t rows, int head_dim, int rope_dim) {
  if (!e.emulate && fast_kernels() && fast_ops()) {
    kv_rows_official_fast(e, kv, rows, head_dim, rope_dim);
    return;
  }
  e.each(rows, [=] DI_HD(int64_t r) {
    float* row = kv + r * head_dim;
    for (int i = 0; i < head_dim; ++i) row[i] = bf16r(row[i]);
    fp8_quant_row(row, head_dim - rope_dim, 64);
  });
}

void indexer_rows_official(Exec& e, float* x, int64_t rows, int dim) {
  if (!e.emulate && fast_kernels() && fast_ops() && indexer_rows_fast_supported(dim)) {
    indexer_rows_official_fast(e, x, rows, dim);
    return;
  }
  const float scale = static_cast<float>(1.0 / sqrt(static_cast<double>(dim)));
  e.each(rows, [=] DI_HD(int64_t r) {
    float* v = x + r * dim;
    double buf[256];
    for (int i = 0; i < dim; ++i) buf[i] = static_cast<double>(bf16r(v[i]));
    for (int span = 1; span < dim; span *= 2) {
      for (int i = 0; i < dim; i += 2 * span) {
        for (int j = i; j < i + span; ++j) {
          const double a = buf[j], b = buf[j + span];
          buf[j] = a + b;
          buf[j + span] = a - b;
        }
      }
    }
    for (int i = 0; i < dim; ++i) v[i] = bf16r(static_cast<float>(buf[i]) * scale);
    const float inv6 = static_cast<float>(1.0 / 6.0);
    const float floor6 = static_cast<float>(6.0 * 0x1p-126);
    for (int b0 = 0; b0 < dim; b0 += 32) {
      const int len = dim - b0 < 32 ? dim - b0 : 32;
      float amax = 0.0f;
      for (int i = 0; i < len; ++i) amax = fmaxf(amax, fabsf(v[b0 + i]));
      const float s = pow2_at_least(fmaxf(amax, floor6) * inv6);
      for (int i = 0; i < len; ++i) v[b0 + i] = bf16r(round_e2m1(v[b0 + i] / s) * s);
    }
  });
}

void embed(Exec& e, const DevWeight& table, const int32_t* ids, int64_t n, int hc, float* X) {
  const DevWeight t = table;
  const int64_t d = table.in;
  e.each(n * d, [=] DI_HD(int64_t i) {
    const int64_t r = i / d, k = i % d;
    const float v = t.at(ids[r], k);
    for (int j = 0; j < hc; ++j) X[(r * hc + j) * d + k] = v;
  });
}

// hc_pre's per-row part: pre/post mixes and the Sinkhorn-normalised comb (row_ss: the rows' sums
// of squares when a fast kernel computed them, else null).
void hc_pre_rows(Exec& e, const HcParams& p, const float* X, const float* mix, int64_t n,
                 float* pre, float* post, float* comb, const float* row_ss) {
  const int hc = p.hc, mixw = (2 + p.hc) * p.hc;
  const int64_t width = hc * p.d;
  const HcParams q = p;
  e.each(n, [=] DI_HD(int64_t t) {
    const float* xt = X + t * width;
    float ss = 0.0f;
    if (row_ss) {
      ss = row_ss[t];
    } else {
      for (int64_t i = 0; i < width; ++i) ss += xt[i] * xt[i];
    }
    const float rs = 1.0f / sqrtf(ss / static_cast<float>(width) + q.rms_eps);
    const float* mt = mix + t * mixw;
    const float eps = q.hc_eps;
    for (int j = 0; j < hc; ++j) {
      pre[t * hc + j] = sigmoidf(mt[j] * rs * q.scale[0] + q.base[j]) + eps;
      post[t * hc + j] = 2.0f * sigmoidf(mt[hc + j] * rs * q.scale[1] + q.base[hc + j]);
    }
    float* C = comb + t * hc * hc;
    for (int i = 0; i < hc; ++i) {
      float mx = -INFINITY;
      for (int j = 0; j < hc; ++j) {
        const int k = 2 * hc + i * hc + j;
        C[i * hc + j] = mt[k] * rs * q.scale[2] + q.base[k];
        mx = fmaxf(mx, C[i * hc + j]);
      }
      float sum = 0.0f;
      for (int j = 0; j < hc; ++j) {
        C[i * hc + j] = expf(C[i * hc + j] - mx);
        sum += C[i * hc + j];
      }
      for (int j = 0; j < hc; ++j) C[i * hc + j] = C[i * hc + j] / sum + eps;
    }
    for (int it = 0; it < q.sinkhorn_iters; ++it) {
      if (it > 0) {  // row normalisation
        for (int i = 0; i < hc; ++i) {
          float s = 0.0f;
          for (int j = 0; j < hc; ++j) s += C[i * hc + j];
          for (int j = 0; j < hc; ++j) C[i * hc + j] /= (s + eps);
        }
      }
      for (int j = 0; j < hc; ++j) {  // column normalisation
        float s = 0.0f;
        for (int i = 0; i < hc; ++i) s += C[i * hc + j];
        for (int i = 0; i < hc; ++i) C[i * hc + j] /= (s + eps);
      }
    }
  });
}

void hc_pre(Exec& e, const HcParams& p, const float* X, const float* mix, int64_t n, float* pre,
            float* post, float* comb, float* u, float* row_ss) {
  const int hc = p.hc;
  const int64_t d = p.d, width = hc * p.d;
  const bool have_ss = !e.emulate && fast_kernels() && row_ss;
  if (have_ss) sum_squares_fast(e, X, n, width, row_ss);
  if (have_ss && fast_ops() && hc_pre_fast_supported(hc)) {
    hc_pre_rows_fast(e, p, mix, row_ss, n, pre, post, comb);
  } else {
    hc_pre_rows(e, p, X, mix, n, pre, post, comb, have_ss ? row_ss : nullptr);
  }
  e.each(n * d, [=] DI_HD(int64_t i) {
    const int64_t t = i / d, k = i % d;
    float acc = 0.0f;
    for (int j = 0; j < hc; ++j) acc += pre[t * hc + j] * X[t * width + j * d + k];
    u[i] = acc;
  });
}

void hc_post(Exec& e, const HcParams& p, const float* X, const float* post, const float* comb,
             const float* y, int64_t n, float* X_out, bool round_out) {
  const int64_t d = p.d;
  const HcPostArgs a{X, post, comb, X_out, p.hc, d, round_out};
  // A thread per (row, k) for all hc outputs: each X value is fetched from memory once, not hc
  // times (same sums, same order).
  e.each(n * d, [=] DI_HD(int64_t i) { hc_post_column(a, i / d, i % d, y[i]); });
}

void hc_head(Exec& e, const HcParams& p, const float* X, const float* mix, int64_t n, float* pre,
             float* h, float* row_ss) {
  const int hc = p.hc;
  const int64_t d = p.d, width = hc * p.d;
  const HcParams q = p;
  const bool have_ss = !e.emulate && fast_kernels() && row_ss;
  if (have_ss) sum_squares_fast(e, X, n, width, row_ss);
  e.each(n, [=] DI_HD(int64_t t) {
    const float* xt = X + t * width;
    float ss = 0.0f;
    if (have_ss) {
      ss = row_ss[t];
    } else {
      for (int64_t i = 0; i < width; ++i) ss += xt[i] * xt[i];
    }
    const float rs = 1.0f / sqrtf(ss / static_cast<float>(width) + q.rms_eps);
    for (int j = 0; j < hc; ++j)
      pre[t * hc + j] = sigmoidf(mix[t * hc + j] * rs * q.scale[0] + q.base[j]) + q.hc_eps;
  });
  e.each(n * d, [=] DI_HD(int64_t i) {
    const int64_t t = i / d, k = i % d;
    float acc = 0.0f;
    for (int j = 0; j < hc; ++j) acc += pre[t * hc + j] * X[t * width + j * d + k];
    h[i] = acc;
  });
}

void argmax_rows(Exec& e, const float* x, int64_t rows, int64_t V, int32_t* out) {
  if (!e.emulate && fast_kernels()) {
    argmax_fast(e, x, rows, V, out);
    return;
  }
  e.each(rows, [=] DI_HD(int64_t r) {
    const float* v = x + r * V;
    int64_t best = 0;
    for (int64_t i = 1; i < V; ++i) {
      if (v[i] > v[best]) best = i;
    }
    out[r] = static_cast<int32_t>(best);
  });
}

void gather_rows(Exec& e, const float* src, const int32_t* rows, int64_t n, int64_t width,
                 float* dst) {
  e.each(n * width, [=] DI_HD(int64_t i) {
    const int64_t k = i / width, c = i % width;
    dst[i] = src[int64_t{rows[k]} * width + c];
  });
}

}  // namespace deepinfer::cuda
