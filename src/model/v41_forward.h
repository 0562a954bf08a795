// Internal to the V4.1 forward: the step context (the chunks of one or more sequences stacked as
// segments of rows), the scratch the sublayers share, and the sublayer entry points
// (v41_attention.cpp: window + compressed attention, compressor, indexer with candidate blocks;
// v41_model.cpp: mHC, MoE, the driver). Row-wise work and the weight products run
// over all rows at once, the attention state work per segment. Every buffer holds bf16 values in
// fp32 unless a comment says fp32.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "backend/cpu/weight_view.h"
#include "model/batch_round.h"
#include "model/rope.h"
#include "model/v41_config.h"
#include "model/v41_engram.h"
#include "model/v41_model.h"
#include "model/v41_weights.h"

namespace deepinfer::model::v41 {

using V41Segment = BatchSegment<V41State>;
using V41LogitRow = LogitRow;

// The Engram parts of a model that has Engram layers (loaded once) and their scratch.
struct V41EngramParts {
  EngramConfig config;
  EngramLayout layout;
  std::vector<EngramWeights> weights;  // per Engram layer, in layout order
  EngramScratch scratch;
  EngramHistory history;  // one sequence's, rebuilt from its recent ids per chunk
};

// Scratch that grows once to the largest step and is then reused.
struct V41Workspace {
  std::vector<float> f[32];
  std::vector<int32_t> topk;  // [n, index_topk] picks of the latest index source (−1 pad)
  // Kept candidate blocks of this step: segment s at candidate_off[s], [seg n,
  // candidate_stride[s]].
  std::vector<uint8_t> candidates;
  std::vector<int64_t> candidate_off, candidate_stride;
  std::vector<float> xq;  // FP8-quantized GEMM inputs
  std::vector<float> route_weights;
  std::vector<int32_t> order, block_picks;
  std::vector<int64_t> run_rows;  // per-segment row counts of a gathered product (MoE experts)
  // The step being run (driver): segments, their row counts, stacked ids, rows' segment and
  // position, logits rows, Engram rows.
  std::vector<V41Segment> segs;
  std::vector<int64_t> seg_rows, row_pos, engram_rows;
  std::vector<int32_t> step_ids, row_seg;
  std::vector<V41LogitRow> logit_rows;
  std::vector<int64_t> head_rows;
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
  int64_t n;                          // rows of the step (all segments)
  std::span<const V41Segment> segs;   // in row order
  std::span<const int64_t> seg_rows;  // segs[i].n
  const int32_t* row_seg;             // [n] segment of each row
  const int64_t* row_pos;             // [n] absolute position of each row
};

// y = x·Wᵀ with the reference's rounding: quantized weights take FP8 inputs per 32 and give bf16;
// BF16 weights give bf16 (bf16_out) or fp32 (fp32 parameters, e.g. the ratio-2 compressor).
void v41_linear(V41Chunk& ch, const float* x, int64_t rows, const cpu::WeightView& w, float* y,
                bool bf16_out);
// The same over rows stacked by segment (seg_rows[i] rows each), batch-invariant (for_each_run).
void v41_linear_rows(V41Chunk& ch, const float* x, std::span<const int64_t> seg_rows,
                     const cpu::WeightView& w, float* y, bool bf16_out);
// Plain cpu::linear (fp32 out) over the runs of seg_rows.
void v41_plain_rows(V41Chunk& ch, const float* x, std::span<const int64_t> seg_rows,
                    const cpu::WeightView& w, float* y);
// RMSNorm in fp32 (weight applied in fp32), result rounded to bf16.
void v41_rms_norm(const float* x, int64_t rows, int64_t dim, const float* w, double eps, float* y);
// Rotates the trailing rope_dim values of each of `rows` vectors of width `dim` at `position`
// (interleaved pairs, fp32, rounded to bf16).
void v41_rope(const RopeTable& t, float* x, int64_t rows, int dim, int rope_dim, int64_t position,
              bool inverse);

// Attention sublayer of `layer` on x [n, d] → y [n, d]; reads/writes each segment's layer state
// and the state of its kv source. Scratch slots 8..21.
void v41_attention(V41Chunk& ch, int layer, const V41BlockWeights& w, const float* x, float* y);

// MoE sublayer on x [n, d] → y [n, d]. Scratch slots 24..31.
void v41_moe(V41Chunk& ch, const V41BlockWeights& w, const float* x, float* y);

// FP4 e2m1 QAT with E4M3 scales per 16 (compressed KV): s = e4m3(max(amax, 6·2^-9) / 6),
// x ← bf16(e2m1(clamp(x/s, ±6))·s).
void fp4_e4m3_scaled_inplace(float* x, int64_t n, int block);

// An empty store of `dim`-wide rows, one per `ratio` positions, in `format` (owned, unpaged).
void init_v41_store(EntryStore& s, EntryFormat format, int dim, int ratio);

}  // namespace deepinfer::model::v41
