// mHC hyper-connections (spec §6.2, §6.9) and the row RMS norm.
#include <algorithm>
#include <cmath>

#include "backend/cpu/simd.h"
#include "model/forward.h"

namespace deepinfer::model {
namespace {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

void rms_norm_rows(const float* x, int64_t rows, int64_t dim, const float* w, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const float ms = cpu::dot(xr, xr, dim) / static_cast<float>(dim);
    const float s = 1.0f / std::sqrt(ms + eps);
    if (w) {
      for (int64_t i = 0; i < dim; ++i) yr[i] = w[i] * (xr[i] * s);
    } else {
      for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * s;
    }
  }
}

void hc_pre(const ChunkContext& ctx, const HyperConnectionWeights& w, const float* X, float* post,
            float* comb, float* u) {
  const ModelConfig& c = ctx.config;
  const int hc = c.hc_mult, mix = c.hc_mix();
  const int64_t d = c.hidden_size, width = hc * d, n = ctx.n;
  float* m = ctx.ws.get(kWsMix, static_cast<size_t>(n * mix));
  linear_all(ctx, X, w.fn, m);
  const float eps = static_cast<float>(c.hc_eps);
  for (int64_t t = 0; t < n; ++t) {
    const float* xt = X + t * width;
    const float rs = 1.0f / std::sqrt(cpu::dot(xt, xt, width) / static_cast<float>(width) +
                                      static_cast<float>(c.rms_eps));
    float* mt = m + t * mix;
    for (int k = 0; k < mix; ++k) mt[k] *= rs;
    float pre[64];
    for (int j = 0; j < hc; ++j) {
      pre[j] = sigmoid(mt[j] * w.scale[0] + w.base[static_cast<size_t>(j)]) + eps;
      post[t * hc + j] =
          2.0f * sigmoid(mt[hc + j] * w.scale[1] + w.base[static_cast<size_t>(hc + j)]);
    }
    float* C = comb + t * hc * hc;
    for (int i = 0; i < hc; ++i) {
      float mx = -INFINITY;
      for (int j = 0; j < hc; ++j) {
        const int k = 2 * hc + i * hc + j;
        C[i * hc + j] = mt[k] * w.scale[2] + w.base[static_cast<size_t>(k)];
        mx = std::max(mx, C[i * hc + j]);
      }
      float sum = 0;
      for (int j = 0; j < hc; ++j) {
        C[i * hc + j] = std::exp(C[i * hc + j] - mx);
        sum += C[i * hc + j];
      }
      for (int j = 0; j < hc; ++j) C[i * hc + j] = C[i * hc + j] / sum + eps;
    }
    auto col_norm = [&] {
      for (int j = 0; j < hc; ++j) {
        float s = 0;
        for (int i = 0; i < hc; ++i) s += C[i * hc + j];
        for (int i = 0; i < hc; ++i) C[i * hc + j] /= (s + eps);
      }
    };
    auto row_norm = [&] {
      for (int i = 0; i < hc; ++i) {
        float s = 0;
        for (int j = 0; j < hc; ++j) s += C[i * hc + j];
        for (int j = 0; j < hc; ++j) C[i * hc + j] /= (s + eps);
      }
    };
    col_norm();
    for (int it = 1; it < c.hc_sinkhorn_iters; ++it) {
      row_norm();
      col_norm();
    }
    float* ut = u + t * d;
    std::fill(ut, ut + d, 0.0f);
    for (int j = 0; j < hc; ++j) cpu::axpy(pre[j], xt + j * d, ut, d);
  }
  round_activation(ctx.hooks, u, n * d);
}

void hc_post(const ChunkContext& ctx, const float* post, const float* comb, const float* y,
             float* X) {
  const ModelConfig& c = ctx.config;
  const int hc = c.hc_mult;
  const int64_t d = c.hidden_size, n = ctx.n;
  float* tmp = ctx.ws.get(kWsU + 100, static_cast<size_t>(hc * d));
  for (int64_t t = 0; t < n; ++t) {
    float* xt = X + t * hc * d;
    const float* C = comb + t * hc * hc;
    for (int j = 0; j < hc; ++j) {
      float* o = tmp + j * d;
      const float pj = post[t * hc + j];
      const float* yt = y + t * d;
      for (int64_t k = 0; k < d; ++k) o[k] = pj * yt[k];
      for (int i = 0; i < hc; ++i) cpu::axpy(C[i * hc + j], xt + i * d, o, d);
    }
    std::copy(tmp, tmp + hc * d, xt);
  }
  round_activation(ctx.hooks, X, n * hc * d);
}

void hc_head(const ChunkContext& ctx, const HyperConnectionWeights& w, const float* X, int64_t rows,
             std::span<const int64_t> seg_rows, float* h) {
  const ModelConfig& c = ctx.config;
  const int hc = c.hc_mult;
  const int64_t d = c.hidden_size, width = hc * d;
  float* m = ctx.ws.get(kWsMix, static_cast<size_t>(rows * hc));
  linear_rows(ctx, X, seg_rows, w.fn, m);
  for (int64_t t = 0; t < rows; ++t) {
    const float* xt = X + t * width;
    const float rs = 1.0f / std::sqrt(cpu::dot(xt, xt, width) / static_cast<float>(width) +
                                      static_cast<float>(c.rms_eps));
    float* ht = h + t * d;
    std::fill(ht, ht + d, 0.0f);
    for (int j = 0; j < hc; ++j) {
      const float pre = sigmoid(m[t * hc + j] * rs * w.scale[0] + w.base[static_cast<size_t>(j)]) +
                        static_cast<float>(c.hc_eps);
      cpu::axpy(pre, xt + j * d, ht, d);
    }
  }
  round_activation(ctx.hooks, h, rows * d);
}

}  // namespace deepinfer::model
