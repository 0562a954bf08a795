// Reference bodies of the MoE routing, SwiGLU and combine steps (src/model/moe.cpp).
#include "backend/cuda/moe.cuh"

namespace deepinfer::cuda {

void moe_route(Exec& e, const RouteArgs& args, const int32_t* ids, int64_t n, float* logits,
               int32_t* idx, float* weights) {
  const RouteArgs a = args;
  if (!e.emulate && moe_route_fast_supported(a)) {
    moe_route_fast(e, a, ids, n, logits, idx, weights);
    return;
  }
  const int E = a.E, K = a.K;
  if (a.scoring == Scoring::Softmax) {
    e.each(n, [=] DI_HD(int64_t r) {
      float* z = logits + r * E;
      float m = z[0];
      for (int i = 1; i < E; ++i) m = fmaxf(m, z[i]);
      float s = 0.0f;
      for (int i = 0; i < E; ++i) s += (z[i] = expf(z[i] - m));
      for (int i = 0; i < E; ++i) z[i] /= s;
    });
  } else {
    e.each(n * E, [=] DI_HD(int64_t i) {
      const float z = logits[i];
      if (a.scoring == Scoring::Sigmoid) {
        logits[i] = 1.0f / (1.0f + expf(-z));
      } else {
        const float sp = z > 20.0f ? z : log1pf(expf(z));
        logits[i] = sqrtf(sp);
      }
    });
  }
  if (a.hash) {
    e.each(n * K, [=] DI_HD(int64_t i) { idx[i] = a.tid2eid[int64_t{ids[i / K]} * K + i % K]; });
  } else {
    e.each(n * E, [=] DI_HD(int64_t i) {
      const int64_t r = i / E;
      const int x = static_cast<int>(i % E);
      const float* z = logits + r * E;
      const float sx = z[x] + a.bias[x];
      int rank = 0;
      for (int q = 0; q < E && rank < K; ++q) {
        const float sq = z[q] + a.bias[q];
        rank += (sq > sx || (sq == sx && q < x));
      }
      if (rank < K) idx[r * K + rank] = x;
    });
  }
  e.each(n, [=] DI_HD(int64_t r) {
    const float* z = logits + r * E;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) sum += z[idx[r * K + k]];
    const float scale = a.routed_scale / (sum + 1e-20f);
    for (int k = 0; k < K; ++k) weights[r * K + k] = z[idx[r * K + k]] * scale;
  });
}

void swiglu(Exec& e, float* h1, const float* h3, int64_t rows, int64_t inter, float limit,
            const float* row_w, bool official) {
  e.each(rows * inter, [=] DI_HD(int64_t i) {
    float g = h1[i], u = h3[i];
    if (limit > 0) {
      g = fminf(g, limit);
      u = fminf(fmaxf(u, -limit), limit);
    }
    float v = g / (1.0f + expf(-g)) * u;
    if (row_w) v *= row_w[i / inter];
    h1[i] = official ? bf16r(v) : v;
  });
}

// y[i] plus row i / d's routed slots at column i % d (weighted unless pre_weighted), bf16-rounded
// when official: moe_combine's value of y[i].
DI_HD inline float combined(const float* out, const float* weights, int K, int64_t d,
                            bool pre_weighted, bool official, const float* y, int64_t i) {
  const int64_t r = i / d, c = i % d;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) {
    const float v = out[(r * K + k) * d + c];
    acc += pre_weighted ? v : weights[r * K + k] * v;
  }
  const float v = y[i] + acc;
  return official ? bf16r(v) : v;
}

void moe_combine(Exec& e, const float* out, const float* weights, int64_t n, int K, int64_t d,
                 bool pre_weighted, bool official, float* y) {
  e.each(n * d, [=] DI_HD(int64_t i) {
    y[i] = combined(out, weights, K, d, pre_weighted, official, y, i);
  });
}

}  // namespace deepinfer::cuda

namespace deepinfer::cuda {

void moe_combine_hc_post(Exec& e, const float* out, const float* weights, int K, bool pre_weighted,
                         bool official, float* y, const HcParams& p, const float* X,
                         const float* post, const float* comb, int64_t n, float* X_out,
                         bool round_out) {
  const int64_t d = p.d;
  const HcPostArgs a{X, post, comb, X_out, p.hc, d, round_out};
  e.each(n * d, [=] DI_HD(int64_t i) {
    const float yv = combined(out, weights, K, d, pre_weighted, official, y, i);
    y[i] = yv;
    hc_post_column(a, i / d, i % d, yv);
  });
}

}  // namespace deepinfer::cuda
