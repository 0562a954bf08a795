// Bodies of the V4.1 row operations (v41_ops.cuh); each mirrors its CPU step in src/model.
#include "backend/cuda/fast_ops.cuh"
#include "backend/cuda/gemv.cuh"
#include "backend/cuda/ops.cuh"
#include "backend/cuda/v41_ops.cuh"

namespace deepinfer::cuda::v41 {

void linear32(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w, float* y,
              int64_t ldy, bool bf16_out, float* xq) {
  if (n <= 0) return;
  if (w.quantized()) {
    const int64_t in = w.in;
    e.each(n * in, [=] DI_HD(int64_t i) { xq[i] = x[(i / in) * ldx + i % in]; });
    fp8_quant(e, xq, n, in, 32);
    DevWeight v = w;
    v.quantize_input = false;
    linear(e, xq, in, n, v, y, ldy, true, nullptr);
    return;
  }
  linear(e, x, ldx, n, w, y, ldy, false, nullptr);
  if (bf16_out) {
    const int64_t out = w.out;
    e.each(n * out, [=] DI_HD(int64_t i) {
      float* p = y + (i / out) * ldy + i % out;
      *p = bf16r(*p);
    });
  }
}

void rms_norm_bf16(Exec& e, const float* x, int64_t rows, int64_t dim, const float* w, float eps,
                   float* y) {
  if (!e.emulate && fast_kernels() && dim >= 256) {  // a block per row (reduce.cu), then bf16
    rms_norm_fast(e, x, rows, dim, w, eps, y, false, false);
    round_bf16(e, y, rows * dim);
    return;
  }
  e.each(rows, [=] DI_HD(int64_t r) {
    const float* xr = x + r * dim;
    float ss = 0.0f;
    for (int64_t k = 0; k < dim; ++k) ss += xr[k] * xr[k];
    const float rs = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
    float* yr = y + r * dim;
    for (int64_t k = 0; k < dim; ++k) yr[k] = bf16r((w ? w[k] : 1.0f) * (xr[k] * rs));
  });
}

void rope_rows(Exec& e, float* x, int64_t rows, int per_row, int width, int rope_dim,
               const float* cos, const float* sin, const int32_t* pos, bool inverse) {
  const int pairs = rope_dim / 2;
  e.each(rows * per_row * pairs, [=] DI_HD(int64_t i) {
    const int64_t pr = i % pairs, v = (i / pairs) % per_row, r = i / (int64_t{pairs} * per_row);
    const int64_t t = int64_t{pos[r]} * pairs + pr;
    const float c = cos[t], s = inverse ? -sin[t] : sin[t];
    float* xp = x + (r * per_row + v) * width + (width - rope_dim) + 2 * pr;
    const float a = xp[0], b = xp[1];
    xp[0] = bf16r(a * c - b * s);
    xp[1] = bf16r(b * c + a * s);
  });
}

void fp8_quant(Exec& e, float* x, int64_t rows, int64_t dim, int block) {
  fp8_quant_rows(e, x, rows, dim, block);
}

void fp4_quant_pow2(Exec& e, float* x, int64_t rows, int64_t dim, int block) {
  const int64_t blocks = (dim + block - 1) / block;
  e.each(rows * blocks, [=] DI_HD(int64_t i) {
    const int64_t b0 = (i % blocks) * block;
    float* v = x + (i / blocks) * dim + b0;
    const int64_t len = dim - b0 < block ? dim - b0 : block;
    float amax = 0.0f;
    for (int64_t k = 0; k < len; ++k) amax = fmaxf(amax, fabsf(v[k]));
    const float inv6 = static_cast<float>(1.0 / 6.0);
    const float floor6 = static_cast<float>(6.0 * 0x1p-126);
    const float s = pow2_at_least(fmaxf(amax, floor6) * inv6);
    for (int64_t k = 0; k < len; ++k) v[k] = bf16r(round_e2m1(v[k] / s) * s);
  });
}

void fp4_quant_e4m3(Exec& e, float* x, int64_t rows, int64_t dim, int block) {
  const int64_t blocks = (dim + block - 1) / block;
  e.each(rows * blocks, [=] DI_HD(int64_t i) {
    const int64_t b0 = (i % blocks) * block;
    float* v = x + (i / blocks) * dim + b0;
    const int64_t len = dim - b0 < block ? dim - b0 : block;
    float amax = 0.0f;
    for (int64_t k = 0; k < len; ++k) amax = fmaxf(amax, fabsf(v[k]));
    amax = fmaxf(amax, 6.0f * 0x1p-9f);
    const float s = round_e4m3(fminf(amax / 6.0f, 448.0f));
    for (int64_t k = 0; k < len; ++k) {
      const float u = fminf(fmaxf(v[k] / s, -6.0f), 6.0f);
      v[k] = bf16r(round_e2m1(u) * s);
    }
  });
}

void hc_mixes(Exec& e, const HcMix& p, const float* X, float* mix, int64_t n, float* pre,
              float* post, float* comb, float* row_ss) {
  const HcMix q = p;
  const bool have_ss = !e.emulate && fast_kernels() && row_ss;
  if (have_ss) sum_squares_fast(e, X, n, q.hc * q.d, row_ss);
  e.each(n, [=] DI_HD(int64_t t) {
    const int hc = q.hc, mixw = (2 + hc) * hc;
    const int64_t width = hc * q.d;
    const float* x = X + t * width;
    float ss = 0.0f;
    if (have_ss) {
      ss = row_ss[t];
    } else {
      for (int64_t k = 0; k < width; ++k) ss += x[k] * x[k];
    }
    const float rs = 1.0f / sqrtf(ss / static_cast<float>(width) + q.rms_eps);
    float* mt = mix + t * mixw;
    for (int i = 0; i < mixw; ++i) mt[i] *= rs;
    const float eps = q.hc_eps;
    for (int j = 0; j < hc; ++j) {
      pre[t * hc + j] = 1.0f / (1.0f + expf(-(mt[j] * q.scale[0] + q.base[j]))) + eps;
      post[t * hc + j] = 2.0f / (1.0f + expf(-(mt[hc + j] * q.scale[1] + q.base[hc + j])));
    }
    float* cm = comb + t * hc * hc;
    for (int i = 0; i < hc * hc; ++i) cm[i] = mt[2 * hc + i] * q.scale[2] + q.base[2 * hc + i];
    for (int i = 0; i < hc; ++i) {
      float mx = cm[i * hc];
      for (int j = 1; j < hc; ++j) mx = fmaxf(mx, cm[i * hc + j]);
      float s = 0.0f;
      for (int j = 0; j < hc; ++j) s += (cm[i * hc + j] = expf(cm[i * hc + j] - mx));
      for (int j = 0; j < hc; ++j) cm[i * hc + j] = cm[i * hc + j] / s + eps;
    }
    for (int it = 0; it < q.iters; ++it) {
      if (it > 0) {
        for (int i = 0; i < hc; ++i) {
          float s = 0.0f;
          for (int j = 0; j < hc; ++j) s += cm[i * hc + j];
          for (int j = 0; j < hc; ++j) cm[i * hc + j] /= (s + eps);
        }
      }
      for (int j = 0; j < hc; ++j) {
        float s = 0.0f;
        for (int i = 0; i < hc; ++i) s += cm[i * hc + j];
        for (int i = 0; i < hc; ++i) cm[i * hc + j] /= (s + eps);
      }
    }
  });
}

void hc_collapse(Exec& e, const float* X, const float* pre, int64_t n, int hc, int64_t d,
                 float* u) {
  e.each(n * d, [=] DI_HD(int64_t i) {
    const int64_t t = i / d, k = i % d;
    float s = 0.0f;
    for (int j = 0; j < hc; ++j) s += pre[t * hc + j] * X[(t * hc + j) * d + k];
    u[i] = bf16r(s);
  });
}

void hc_expand(Exec& e, const float* X, const float* y, const float* post, const float* comb,
               int64_t n, int hc, int64_t d, float* X_out) {
  e.each(n * hc * d, [=] DI_HD(int64_t i) {
    const int64_t k = i % d, j = (i / d) % hc, t = i / (d * hc);
    const float* cm = comb + t * hc * hc;
    const float s = post[t * hc + j] * y[t * d + k];
    float r = 0.0f;
    for (int m = 0; m < hc; ++m) r += cm[m * hc + j] * X[(t * hc + m) * d + k];
    X_out[i] = bf16r(s + r);
  });
}

void embed_rows(Exec& e, const DevWeight& table, const int32_t* ids, int64_t n, int hc, float* X,
                float* pre) {
  const DevWeight t = table;
  const int64_t d = table.in;
  e.each(n * d, [=] DI_HD(int64_t i) {
    const int64_t r = i / d, k = i % d;
    const float v = bf16r(t.at(ids[r], k));
    for (int j = 0; j < hc; ++j) X[(r * hc + j) * d + k] = v;
    if (k < hc) pre[r * hc + k] = k == 0 ? 1.0f : 0.0f;
  });
}

void moe_route(Exec& e, const Route& p, float* scores, int64_t n, int32_t* sel, float* wsel) {
  const Route q = p;
  e.each(n, [=] DI_HD(int64_t t) {
    const int E = q.E, k = q.k;
    float* s = scores + t * E;
    for (int x = 0; x < E; ++x) s[x] /= q.temp;
    if (q.scoring == 2) {
      float mx = s[0], sum = 0.0f;
      for (int x = 1; x < E; ++x) mx = fmaxf(mx, s[x]);
      for (int x = 0; x < E; ++x) sum += (s[x] = expf(s[x] - mx));
      for (int x = 0; x < E; ++x) s[x] /= sum;
    } else if (q.scoring == 1) {
      for (int x = 0; x < E; ++x) s[x] = 1.0f / (1.0f + expf(-s[x]));
    } else {
      for (int x = 0; x < E; ++x) s[x] = sqrtf(s[x] > 20.0f ? s[x] : log1pf(expf(s[x])));
    }
    int32_t* st = sel + t * k;
    for (int i = 0; i < k; ++i) {  // top-k of s + bias, lower index on ties
      int best = -1;
      float bv = 0.0f;
      for (int x = 0; x < E; ++x) {
        bool used = false;
        for (int u = 0; u < i; ++u) used = used || st[u] == x;
        if (used) continue;
        const float v = s[x] + q.bias[x];
        if (best < 0 || v > bv) best = x, bv = v;
      }
      st[i] = best;
    }
    float sum = 0.0f;
    for (int i = 0; i < k; ++i) sum += (wsel[t * k + i] = s[st[i]]);
    for (int i = 0; i < k; ++i) {
      if (q.norm && k > 1) wsel[t * k + i] /= (sum + 1e-20f);
      wsel[t * k + i] *= q.routed_scaling;
    }
  });
}

void swiglu(Exec& e, float* h1, const float* h3, int64_t rows, int64_t inter, float lim,
            const float* weights) {
  e.each(rows * inter, [=] DI_HD(int64_t i) {
    float g = h1[i], u = h3[i];
    if (lim > 0) {
      u = fminf(fmaxf(u, -lim), lim);
      g = fminf(g, lim);
    }
    float v = g / (1.0f + expf(-g)) * u;
    if (weights) v *= weights[i / inter];
    h1[i] = bf16r(v);
  });
}

void moe_combine(Exec& e, const float* ye, const float* ys, const int32_t* sel, int64_t n, int k,
                 int64_t d, float* y) {
  e.each(n * d, [=] DI_HD(int64_t i) {
    const int64_t t = i / d, c = i % d;
    const int32_t* st = sel + t * k;
    float acc = 0.0f;
    int last = -1;
    for (int m = 0; m < k; ++m) {  // the experts in increasing id, as the CPU's expert loop
      int next = -1, at = -1;
      for (int u = 0; u < k; ++u)
        if (st[u] > last && (next < 0 || st[u] < next)) next = st[u], at = u;
      if (at < 0) break;
      acc += ye[(t * k + at) * d + c];
      last = next;
    }
    y[i] = bf16r(acc + ys[i]);
  });
}

void engram_embed(Exec& e, const uint8_t* table, const uint8_t* scale, int64_t table_rows,
                  const int64_t* rows, int64_t row_stride, int64_t n, int n_cols, int head_dim,
                  float* emb) {
  const int64_t in = int64_t{n_cols} * head_dim;
  e.each(n * in, [=] DI_HD(int64_t i) {
    const int64_t t = i / in, c = (i % in) / head_dim, k = i % head_dim;
    const int64_t r = rows[t * row_stride + c];
    if (r < 0 || r >= table_rows) {
      emb[i] = 0.0f;
      return;
    }
    emb[i] = bf16r(e4m3_to_float(table[r * head_dim + k]) *
                   ue8m0_to_float(scale[r * (head_dim / 32) + k / 32]));
  });
}

void engram_gate(Exec& e, float* X, const float* kv, const float* qk, int64_t n, int hc, int64_t d,
                 float eps) {
  const float inv_sqrt_dim = static_cast<float>(1.0 / sqrt(static_cast<double>(d)));
  e.each(n * hc, [=] DI_HD(int64_t i) {
    const int64_t t = i / hc, j = i % hc;
    const float* kt = kv + t * (hc + 1) * d;
    const float* value = kt + hc * d;
    const float* key = kt + j * d;
    const float* q = qk + j * d;
    float* x = X + (t * hc + j) * d;
    double xx = 0, kk = 0, dot = 0;
    for (int64_t m = 0; m < d; ++m) {
      xx += static_cast<double>(x[m]) * x[m];
      kk += static_cast<double>(key[m]) * key[m];
      dot += static_cast<double>(x[m] * q[m] * key[m]);
    }
    const float rx = 1.0f / sqrtf(static_cast<float>(xx / static_cast<double>(d)) + eps);
    const float rk = 1.0f / sqrtf(static_cast<float>(kk / static_cast<double>(d)) + eps);
    const float g = static_cast<float>(dot) * (rx * rk) * inv_sqrt_dim;
    const float mag = sqrtf(fmaxf(fabsf(g), 1e-6f));
    const float gate = 1.0f / (1.0f + expf(-copysignf(mag, g)));
    for (int64_t m = 0; m < d; ++m) x[m] = bf16r(x[m] + gate * value[m]);
  });
}

void select_topk_by_id(Exec& e, const Rows& rows, const float* sc, int64_t S, int ratio, int K,
                       uint8_t* flags, int32_t* tk) {
  if (!e.emulate && fast_kernels() && fast_ops() && topk_select_supported(K, S)) {
    topk_select(e, rows,
                {.scores = sc, .stride = S, .ratio = ratio, .topk = K, .by_id = true, .pad = true},
                tk, nullptr);
    return;
  }
  // A thread per (row, entry): an entry is picked when fewer than K rank before it (the order is
  // total, so exactly min(K, visible) are), and lands at its index among the picks, which sorts
  // them ascending; the same picks as one selection per row.
  const Rows rw = rows;
  e.each(rows.n * S, [=] DI_HD(int64_t i) {
    const int64_t t = i / S;
    const int32_t j = static_cast<int32_t>(i % S);
    const int32_t nvis = static_cast<int32_t>((int64_t{rw.pos[t]} + 1) / ratio);
    if (j >= nvis) return;
    const float* st = sc + t * S;
    int32_t rank = 0;
    if (nvis > K)
      for (int32_t m = 0; m < nvis && rank < K; ++m) rank += ranks_before(st, m, j);
    flags[i] = rank < K;
  });
  e.each(rows.n * S, [=] DI_HD(int64_t i) {
    const int64_t t = i / S, j = i % S;
    if (j >= (int64_t{rw.pos[t]} + 1) / ratio || !flags[i]) return;
    int32_t at = 0;
    for (int64_t m = t * S; m < i; ++m) at += flags[m];
    tk[t * K + at] = static_cast<int32_t>(j);
  });
  e.each(rows.n * K, [=] DI_HD(int64_t i) {
    const int64_t t = i / K, visible = (int64_t{rw.pos[t]} + 1) / ratio;
    if (i % K >= visible) tk[i] = -1;
  });
}

}  // namespace deepinfer::cuda::v41
