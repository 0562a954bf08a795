// The operations of the V4 forward on device buffers (fp32 activations), each a launch (or, when
// emulated, a host loop) on an Exec. They mirror src/model's CPU steps one for one; `official`
// selects DeepSeek's reference roundings where the two numerics differ (docs/model.md).
#pragma once

#include <cstdint>

#include "backend/cuda/exec.cuh"
#include "backend/cuda/formats.cuh"

namespace deepinfer::cuda {

// Per-launch row metadata (device arrays, one entry per chunk row): the token, its sequence slot,
// its absolute position, and the first row / first position / length of its sequence's segment.
struct Rows {
  const int32_t* ids = nullptr;
  const int32_t* seq = nullptr;
  const int32_t* pos = nullptr;
  const int32_t* start = nullptr;
  const int32_t* pos0 = nullptr;
  const int32_t* len = nullptr;
  int64_t n = 0;
};

// y[r, o] = x[r, :] · W[o, :] for r < n (x row stride ldx, y row stride ldy). Official numerics on
// FP8/FP4 weights: x FP8-quantized per 1×128 first (when w.quantize_input; scratch xq holds
// n × w.in floats) and y rounded to bf16.
// xq_ready (may be null): x already quantized so (n × w.in, as fp8_quant_rows_from leaves it),
// taken instead of quantizing again, so several products of one input quantize it once.
void linear(Exec& e, const float* x, int64_t ldx, int64_t n, const DevWeight& w, float* y,
            int64_t ldy, bool official, float* xq, const float* xq_ready = nullptr);

// The same per routed slot: slot s = r·K + k uses expert idx[s] of `experts` (a device array) on
// x row s / K (x_per_slot: row s instead) into y row s; quantize_x: FP8-quantize x first;
// format: the experts' (common) storage format.
void linear_experts(Exec& e, const float* x, bool x_per_slot, int64_t n_slots, int K,
                    const DevWeight* experts, const int32_t* idx, float* y, int64_t ldy,
                    int64_t out, int64_t in, bool official, bool quantize_x, DevFormat format,
                    float* xq);

// x ← bf16(e4m3(x/s)·s) per block of `block` along rows of `dim` (rows × dim).
void fp8_quant_rows(Exec& e, float* x, int64_t rows, int64_t dim, int block);
// dst (rows × dim) = src rows (stride ld) quantized as fp8_quant_rows does, in one launch.
void fp8_quant_rows_from(Exec& e, const float* src, int64_t ld, int64_t rows, int64_t dim,
                         int block, float* dst);
void round_bf16(Exec& e, float* x, int64_t n);
void scale_values(Exec& e, float* x, int64_t n, float s);
// round_bf16, scale_values and round_bf16 again as one launch (the same bits).
void scale_values_bf16(Exec& e, float* x, int64_t n, float s);

// y[r] = x[r] · rsqrt(mean(x[r]²) + eps) · w (w may be null). In place allowed.
// round_in / round_out: x bf16-rounded as read (x itself is left as it is), y as written — the
// official numerics' round_bf16 before and after, in the same launch.
void rms_norm(Exec& e, const float* x, int64_t rows, int64_t dim, const float* w, float eps,
              float* y, bool round_in = false, bool round_out = false);
// rms_norm, and yq = y's FP8 fake-quantized copy in 128-value blocks (fp8_quant_rows_from), in one
// launch on the device where the row allows it.
void rms_norm_quant(Exec& e, const float* x, int64_t rows, int64_t dim, const float* w, float eps,
                    float* y, bool round_in, bool round_out, float* yq);
// Official per-head q norm with bf16 tensor ops (rows of head_dim).
void q_head_norm_official(Exec& e, float* q, int64_t rows, int64_t head_dim, float eps);
// RoPE of rows of per_row vectors (rope()'s arguments): pos[r] for the r-th row.
struct RopeRows {
  const float* inv_freq = nullptr;
  float attention_factor = 1.0f;
  const int32_t* pos = nullptr;
  int per_row = 1, pairs = 0;
};
// q_head_norm_official, then rope(q, n, per_row, head_dim, …) over its rows (rows = n · per_row):
// on the device one launch with the same bits.
// The official KV row: rms_norm(kv, w, bf16 out), rope() over its last rope_dim values, then
// kv_rows_official; on the device one launch with the same bits.
void kv_norm_rope_official(Exec& e, float* kv, int64_t rows, int head_dim, int rope_dim,
                           const float* w, float eps, const RopeRows& rope_rows);
void q_head_norm_rope_official(Exec& e, float* q, int64_t rows, int64_t head_dim, float eps,
                               const RopeRows& rope_rows);

// Interleaved RoPE on the last 2·pairs dims of each `width`-wide vector, `per_row` vectors a row,
// at the row's position pos[r] (inverse: the rotation by −φ).
void rope(Exec& e, float* x, int64_t n, int per_row, int width, int pairs, const float* inv_freq,
          float attention_factor, const int32_t* pos, bool inverse);
// rope() then round_bf16 over the whole rows (width even), as one launch: the same bits.
void rope_round_bf16(Exec& e, float* x, int64_t n, int per_row, int width, int pairs,
                     const float* inv_freq, float attention_factor, const int32_t* pos,
                     bool inverse);

// Official KV QAT: bf16 rows, FP8 per 64 on the first head_dim − rope_dim dims.
void kv_rows_official(Exec& e, float* kv, int64_t rows, int head_dim, int rope_dim);
// Official indexer QAT: bf16, Hadamard over dim (≤ 256), FP4 per 32.
void indexer_rows_official(Exec& e, float* x, int64_t rows, int dim);

// Embedding rows: X[r, j, :] = embed[ids[r]] for every stream j.
void embed(Exec& e, const DevWeight& table, const int32_t* ids, int64_t n, int hc, float* X);

// mHC (spec §6.2): from mix = X·fnᵀ [n, (2+hc)·hc], pre/post/comb per row, then u = Σ pre_j X_j.
struct HcParams {
  int hc = 1, sinkhorn_iters = 1;
  int64_t d = 0;
  float hc_eps = 0, rms_eps = 0;
  const float* base = nullptr;   // device [(2+hc)·hc]
  const float* scale = nullptr;  // device [3]
};
// row_ss: scratch [n] for the rows' sums of squares (the fast path), may be null.
// hc_pre_rows is its per-row part (mixes, Sinkhorn), from given sums of squares when row_ss is
// not null.
void hc_pre_rows(Exec& e, const HcParams& p, const float* X, const float* mix, int64_t n,
                 float* pre, float* post, float* comb, const float* row_ss);
void hc_pre(Exec& e, const HcParams& p, const float* X, const float* mix, int64_t n, float* pre,
            float* post, float* comb, float* u, float* row_ss);
// hc_post's outputs at (row t, column k) from y's value yv there: its expressions, for the launches
// that compute y and X_out together.
struct HcPostArgs {
  const float* X = nullptr;
  const float* post = nullptr;
  const float* comb = nullptr;
  float* X_out = nullptr;
  int hc = 0;
  int64_t d = 0;
  bool round_out = false;
};
DI_HD inline void hc_post_column(const HcPostArgs& a, int64_t t, int64_t k, float yv) {
  const int hc = a.hc;
  const float* C = a.comb + t * hc * hc;
  for (int j = 0; j < hc; ++j) {
    float o = a.post[t * hc + j] * yv;
    for (int s = 0; s < hc; ++s) o += C[s * hc + j] * a.X[(t * hc + s) * a.d + k];
    a.X_out[(t * hc + j) * a.d + k] = a.round_out ? bf16r(o) : o;
  }
}
// X_out[r, j] = post_j · y[r] + Σ_i comb[i, j] · X[r, i].
// round_out: X_out bf16-rounded as written.
void hc_post(Exec& e, const HcParams& p, const float* X, const float* post, const float* comb,
             const float* y, int64_t n, float* X_out, bool round_out = false);
// hc_head: h[r] = Σ_j (σ(mix_j · rs · scale0 + base_j) + eps) X_j.
void hc_head(Exec& e, const HcParams& p, const float* X, const float* mix, int64_t n, float* pre,
             float* h, float* row_ss);

// out[r] = index of the largest of x[r, 0:V] (lowest index among equals).
void argmax_rows(Exec& e, const float* x, int64_t rows, int64_t V, int32_t* out);
// dst[k] = src[rows[k]] (rows of `width` floats).
void gather_rows(Exec& e, const float* src, const int32_t* rows, int64_t n, int64_t width,
                 float* dst);

}  // namespace deepinfer::cuda
