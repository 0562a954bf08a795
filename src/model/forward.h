// Internal to the model module: the pieces of one forward pass over a chunk of n tokens. Each
// sublayer reads its normalised input x [n, d] and writes its output y [n, d]; the chunk starts
// at absolute position pos0. Buffers come from the Workspace, so steady decoding allocates
// nothing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "model/config.h"
#include "model/numerics.h"
#include "model/rope.h"
#include "model/state.h"
#include "model/weights.h"

namespace deepinfer::model {

// Growable scratch buffers; get(i, n) returns buffer i with at least n floats.
struct Workspace {
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<int32_t>> i32;
  float* get(size_t i, size_t n) {
    if (f32.size() <= i) f32.resize(i + 1);
    if (f32[i].size() < n) f32[i].resize(n);
    return f32[i].data();
  }
  int32_t* get_i32(size_t i, size_t n) {
    if (i32.size() <= i) i32.resize(i + 1);
    if (i32[i].size() < n) i32[i].resize(n);
    return i32[i].data();
  }
};

struct ChunkContext {
  const ModelConfig& config;
  const NumericsHooks& hooks;
  cpu::ThreadPool* pool;
  Workspace& ws;
  const RopeTable& main_rope;
  const RopeTable& compress_rope;
  const int32_t* ids;  // [n]
  int64_t n;
  int64_t pos0;
};

// y[r] = x[r] · rsqrt(mean(x[r]²) + eps) · w   (w may be null: unweighted)
void rms_norm_rows(const float* x, int64_t rows, int64_t dim, const float* w, float eps, float* y);

// mHC (spec §6.2). hc_pre computes post [n, hc] and comb [n, hc, hc] and collapses the streams
// X [n, hc, d] into u [n, d]; hc_post writes X'_j = post_j·y + Σ_i comb_ij·X_i in place.
void hc_pre(const ChunkContext& ctx, const HyperConnectionWeights& w, const float* X, float* post,
            float* comb, float* u);
void hc_post(const ChunkContext& ctx, const float* post, const float* comb, const float* y,
             float* X);
// Final collapse (spec §6.9): h [rows, d] from X rows.
void hc_head(const ChunkContext& ctx, const HyperConnectionWeights& w, const float* X, int64_t rows,
             float* h);

// Attention sublayer of block `layer` (spec §6.3–6.7).
void attention_sublayer(const ChunkContext& ctx, int layer, const BlockWeights& w, BlockState& st,
                        const float* x, float* y);

// MoE sublayer (spec §6.8).
void moe_sublayer(const ChunkContext& ctx, const BlockWeights& w, bool hash, const float* x,
                  float* y);

// One block on the streams X [n, hc, d], in place: mHC around the attention sublayer, then
// around the MoE sublayer (spec §6.2–6.8). Scratch: kWsU..kWsComb.
void block_forward(const ChunkContext& ctx, int layer, const BlockWeights& w, bool hash,
                   BlockState& st, float* X);

// Logits of the `logit_rows` that fall in the chunk [start, start+n) from its streams X: hc_head,
// final norm, LM head (spec §6.9). Row i of logit_rows goes to logits + i·vocab. Scratch:
// kWsMix+1..kWsMix+3.
void chunk_logits(const ChunkContext& ctx, const HyperConnectionWeights& hc_head_w,
                  const std::vector<float>& norm, const cpu::WeightView& head, const float* X,
                  int64_t start, std::span<const int64_t> logit_rows, float* logits);

// Workspace slots (each user owns its slot numbers).
enum WsSlot : size_t {
  kWsX = 0,
  kWsU,
  kWsXn,
  kWsY,
  kWsPost,
  kWsComb,
  kWsMix,        // driver + hc
  kWsAttn = 16,  // attention: 16..39
  kWsMoe = 40,   // moe: 40..55
};

}  // namespace deepinfer::model
