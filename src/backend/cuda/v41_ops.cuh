// The V4.1 forward's row operations on device buffers (fp32 holding bf16 values), each a launch or,
// emulated, a host loop. They mirror the CPU steps of src/model/v41_*.cpp one for one: the same
// roundings in the same places, the same top-k tie rule (lower index first).
#pragma once

#include <cstdint>

#include "backend/cuda/exec.cuh"
#include "backend/cuda/formats.cuh"
#include "backend/cuda/ops.cuh"

namespace deepinfer::cuda::v41 {

// Whether entry a ranks before entry b: higher score, then lower index.
DI_HD inline bool ranks_before(const float* s, int32_t a, int32_t b) {
  return s[a] > s[b] || (s[a] == s[b] && a < b);
}

// The indexer's top-K of each row's visible scores (the first (pos + 1) / ratio of sc's stride S)
// by rank, written in id order into tk [rows, K], -1 after them. The reference bodies rank every
// entry (flags: rows × S bytes); on the device with fast kernels, topk_select (radix select).
void select_topk_by_id(Exec& e, const Rows& rows, const float* sc, int64_t S, int ratio, int K,
                       uint8_t* flags, int32_t* tk);

// y = x·Wᵀ as model::qat32_linear: before FP8/FP4 weights x is FP8-quantized per 1×32 (into xq,
// n × w.in floats) and y rounded to bf16; other formats give fp32, rounded when bf16_out.
void linear32(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w, float* y,
              int64_t ldy, bool bf16_out, float* xq);

// y = bf16(w ⊙ (x · rsqrt(mean(x²) + eps))) per row (w may be null); in place allowed. On the
// device (fast kernels) the sum of squares is a block reduction.
void rms_norm_bf16(Exec& e, const float* x, int64_t rows, int64_t dim, const float* w, float eps,
                   float* y);

// The trailing rope_dim values of each of per_row vectors (width wide) of row r rotate at
// pos[r] with the host-made tables cos/sin [positions, rope_dim/2]; results rounded to bf16.
void rope_rows(Exec& e, float* x, int64_t rows, int per_row, int width, int rope_dim,
               const float* cos, const float* sin, const int32_t* pos, bool inverse);

// FP8 e4m3 QAT per `block` (UE8M0 power-of-two scales), bf16 results.
void fp8_quant(Exec& e, float* x, int64_t rows, int64_t dim, int block);
// FP4 e2m1 QAT per `block` with power-of-two (E8M0) scales (cpu::fp4_act_quant_inplace).
void fp4_quant_pow2(Exec& e, float* x, int64_t rows, int64_t dim, int block);
// FP4 e2m1 QAT with E4M3 scales per `block` (v41 fp4_e4m3_scaled_inplace).
void fp4_quant_e4m3(Exec& e, float* x, int64_t rows, int64_t dim, int block);

// mHC mixes of n rows (mix = X·fnᵀ, fp32): pre, post, comb after the Sinkhorn iterations.
struct HcMix {
  int hc = 1, iters = 1;
  int64_t d = 0;
  float hc_eps = 0, rms_eps = 0;
  const float* scale = nullptr;  // [3]
  const float* base = nullptr;   // [(2+hc)·hc]
};
// row_ss: scratch [n] for the rows' sums of squares (the device's block reduction), may be null.
void hc_mixes(Exec& e, const HcMix& p, const float* X, float* mix, int64_t n, float* pre,
              float* post, float* comb, float* row_ss);
// u = bf16(Σ_j pre_j · X_j).
void hc_collapse(Exec& e, const float* X, const float* pre, int64_t n, int hc, int64_t d, float* u);
// X_out_j = bf16(post_j · y + Σ_i comb_ij · X_i).
void hc_expand(Exec& e, const float* X, const float* y, const float* post, const float* comb,
               int64_t n, int hc, int64_t d, float* X_out);

// X[r, j] = bf16(embed[ids[r]]) for every stream; pre[r] = one-hot(0).
void embed_rows(Exec& e, const DevWeight& table, const int32_t* ids, int64_t n, int hc, float* X,
                float* pre);

// Routing of n rows: scores [n, E] (fp32 gate products) → sel [n, k] and weights [n, k].
// scoring: 0 sqrtsoftplus, 1 sigmoid, 2 softmax.
struct Route {
  int E = 0, k = 0, scoring = 0;
  float temp = 1, routed_scaling = 1;
  bool norm = true;
  const float* bias = nullptr;
};
void moe_route(Exec& e, const Route& p, float* scores, int64_t n, int32_t* sel, float* wsel);
// h1 ← bf16(silu(g)·u·weight) with the SwiGLU clamp (lim ≤ 0: none); weights may be null.
void swiglu(Exec& e, float* h1, const float* h3, int64_t rows, int64_t inter, float lim,
            const float* weights);
// y[t] = bf16(Σ over t's experts in increasing id of ye[t·k + i] + ys[t]).
void moe_combine(Exec& e, const float* ye, const float* ys, const int32_t* sel, int64_t n, int k,
                 int64_t d, float* y);

// Engram: emb[t, c] = bf16(e4m3 table row · E8M0 scale per 32) (zeros outside the table).
void engram_embed(Exec& e, const uint8_t* table, const uint8_t* scale, int64_t table_rows,
                  const int64_t* rows, int64_t row_stride, int64_t n, int n_cols, int head_dim,
                  float* emb);
// The gated write of value into the hc streams (v41 engram_forward after its product).
void engram_gate(Exec& e, float* X, const float* kv, const float* qk, int64_t n, int hc, int64_t d,
                 float eps);

}  // namespace deepinfer::cuda::v41
