// Internal to the V4.1 forward: the chunk context (n tokens from position pos0), the scratch the
// sublayers share, and the sublayer entry points (v41_attention.cpp: window + compressed attention,
// compressor, indexer with candidate blocks; v41_model.cpp: mHC, MoE, the driver). Every buffer
// holds bf16 values in fp32 unless a comment says fp32.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "backend/cpu/weight_view.h"
#include "model/rope.h"
#include "model/v41_config.h"
#include "model/v41_model.h"
#include "model/v41_weights.h"

namespace deepinfer::model::v41 {

// Scratch that grows once to the largest chunk and is then reused.
struct V41Workspace {
  std::vector<float> f[32];
  std::vector<int32_t> topk;        // [n, index_topk] picks of the latest index source (−1 pad)
  std::vector<uint8_t> candidates;  // [n, blocks] kept candidate blocks of this chunk
  int64_t candidate_stride = 0;
  std::vector<float> xq;  // FP8-quantized GEMM inputs
  std::vector<float> route_weights;
  std::vector<int32_t> order, block_picks;
  float* get(int slot, size_t n) {
    std::vector<float>& v = f[slot];
    if (v.size() < n) v.resize(n);
    return v.data();
  }
};

struct V41Chunk {
  const V41Config& c;
  cpu::ThreadPool* pool;
  V41Workspace& ws;
  const RopeTable& main_rope;
  const RopeTable& compress_rope;
  int64_t n;
  int64_t pos0;
};

// y = x·Wᵀ with the reference's rounding: quantized weights take FP8 inputs per 32 and give bf16;
// BF16 weights give bf16 (bf16_out) or fp32 (fp32 parameters, e.g. the ratio-2 compressor).
void v41_linear(V41Chunk& ch, const float* x, int64_t rows, const cpu::WeightView& w, float* y,
                bool bf16_out);
// RMSNorm in fp32 (weight applied in fp32), result rounded to bf16.
void v41_rms_norm(const float* x, int64_t rows, int64_t dim, const float* w, double eps, float* y);
// Rotates the trailing rope_dim values of each of `rows` vectors of width `dim` at `position`
// (interleaved pairs, fp32, rounded to bf16).
void v41_rope(const RopeTable& t, float* x, int64_t rows, int dim, int rope_dim, int64_t position,
              bool inverse);

// Attention sublayer of `layer` on x [n, d] → y [n, d]; reads/writes the layer's state and the
// state of its kv source. Scratch slots 8..21.
void v41_attention(V41Chunk& ch, int layer, const V41BlockWeights& w,
                   std::vector<V41LayerState>& st, const float* x, float* y);

// MoE sublayer on x [n, d] → y [n, d]. Scratch slots 24..31.
void v41_moe(V41Chunk& ch, const V41BlockWeights& w, const float* x, float* y);

// FP4 e2m1 QAT with E4M3 scales per 16 (compressed KV): s = e4m3(max(amax, 6·2^-9) / 6),
// x ← bf16(e2m1(clamp(x/s, ±6))·s).
void fp4_e4m3_scaled_inplace(float* x, int64_t n, int block);

// An empty store of `dim`-wide rows, one per `ratio` positions, in `format` (owned, unpaged).
void init_v41_store(EntryStore& s, EntryFormat format, int dim, int ratio);

}  // namespace deepinfer::model::v41
