// The MoE steps of a V4 block on the device (spec §6.8), one pass without a host loop over
// experts: routing (sqrtsoftplus/sigmoid/softmax scores, hash or top-k of score + bias by rank),
// per-slot expert products (ops.cuh linear_experts), clamped SwiGLU, weighted combine.
#pragma once

#include <cstdint>

#include "backend/cuda/ops.cuh"

namespace deepinfer::cuda {

enum class Scoring : int { SqrtSoftplus = 0, Sigmoid = 1, Softmax = 2 };

struct RouteArgs {
  int E = 0, K = 0;
  Scoring scoring = Scoring::SqrtSoftplus;
  bool hash = false;
  const int32_t* tid2eid = nullptr;  // [vocab, K] (hash)
  const float* bias = nullptr;       // [E]
  float routed_scale = 1.0f;
};
// logits [n, E] → scores in place; idx [n, K], weights [n, K].
void moe_route(Exec& e, const RouteArgs& a, const int32_t* ids, int64_t n, float* logits,
               int32_t* idx, float* weights);
// The same as one block per row (moe_fast.cu), same bits; moe_route takes it on the device
// where supported (not softmax scoring, E ≤ 1,024; DEEPINFER_CUDA_ROUTE_FUSED=0 off).
bool moe_route_fast_supported(const RouteArgs& a);
void moe_route_fast(Exec& e, const RouteArgs& a, const int32_t* ids, int64_t n, float* logits,
                    int32_t* idx, float* weights);

// h1 ← silu(min(h1, L)) · clamp(h3, −L, L) (L ≤ 0: no clamp), times row_w[row] when given;
// bf16-rounded when official. Rows of `inter`.
void swiglu(Exec& e, float* h1, const float* h3, int64_t rows, int64_t inter, float limit,
            const float* row_w, bool official);
// swiglu() (row weights where given), and xq = h1's FP8 fake-quantized copy in 128-value blocks
// (fp8_quant_rows_from's bits), in one launch (moe_fast.cu); false (nothing launched) where it
// does not apply: emulated, inter not a multiple of 128, fused_rows() off.
bool swiglu_quant(Exec& e, float* h1, const float* h3, int64_t rows, int64_t inter, float limit,
                  bool official, float* xq, const float* row_w = nullptr);

// y[r] += Σ_k (weights[r, k] or 1 when pre_weighted) · out[r·K + k]; bf16 when official.
void moe_combine(Exec& e, const float* out, const float* weights, int64_t n, int K, int64_t d,
                 bool pre_weighted, bool official, float* y);
// moe_combine into y, then hc_post(p, X, post, comb, y, n, X_out, round_out), as one launch of a
// thread per (row, column): the same expressions on the same values (the same bits); hc_post's
// column k needs only y's column k of its row.
void moe_combine_hc_post(Exec& e, const float* out, const float* weights, int K, bool pre_weighted,
                         bool official, float* y, const HcParams& p, const float* X,
                         const float* post, const float* comb, int64_t n, float* X_out,
                         bool round_out);

}  // namespace deepinfer::cuda
