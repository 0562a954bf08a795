// DeepSeek V4.1 on the CPU (spec §12): V41Model::load(dir) reads config.json + safetensors (mapped,
// zero copy); forward() runs a chunk of tokens from state.position on (prefill, chunked prefill or
// one decode step: one code path), advances the per-sequence state and returns logits at the rows
// asked for. Numerics follow DeepSeek's official V4.1 code: bf16 activations, FP8 window KV, FP4
// compressed KV (E4M3 per 16) and index keys (E8M0 per 32), FP8 GEMM inputs per 32. Engram
// (v41_engram.h) is applied at its layers; the DSpark stages read the stream means forward()
// exports.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "common/result.h"
#include "model/rope.h"
#include "model/safetensors.h"
#include "model/state.h"
#include "model/v41_config.h"
#include "model/v41_weights.h"

namespace deepinfer::model::v41 {

// Per layer: the window ring; per kv source: the compressor tail, the compressed entries (after
// RoPE at r·j and FP4 QAT) and, for key owners, the index keys. The entries live in EntryStores
// (model/state.h): owned fp32 rows by default, or packed rows paged inside an engine's KV blocks.
// Plain data: copy it to snapshot (a paged store copies only its bookkeeping).
struct V41LayerState {
  std::vector<float> ring;                 // [window, head_dim]: slot p mod window holds kv(p)
  std::vector<float> tail_kv, tail_score;  // [ratio, head_dim] fp32 (ratio > 1 kv sources)
  EntryStore compressed;                   // entry j covers positions [r·j, r·j + r), head_dim
  EntryStore index_keys;                   // the same entries' index keys (key owners)
};

struct V41State {
  int64_t position = 0;
  std::vector<V41LayerState> layers;
  std::vector<int32_t> recent_ids;  // the last engram_max_ngram_size − 1 token ids, oldest first

  // Points every paged store at the sequence's current block table.
  void bind_table(std::span<const int32_t> table) {
    for (V41LayerState& l : layers) {
      l.compressed.table = table;
      l.index_keys.table = table;
    }
  }
};

struct V41Options {
  int threads = 1;
};

// One sequence of a batched step: ids at positions state->position, …; logits of chunk rows
// logit_rows[k] go to logits[k·vocab …).
struct V41BatchSequence {
  V41State* state = nullptr;
  std::span<const int32_t> ids;
  std::span<const int64_t> logit_rows;
  float* logits = nullptr;
};

struct V41Workspace;
struct V41EngramParts;

class V41Model {
 public:
  static Result<std::unique_ptr<V41Model>> load(const std::string& dir,
                                                const V41Options& options = {});
  ~V41Model();

  const V41Config& config() const { return config_; }
  const V41Weights& weights() const { return weights_; }
  // Notes for the user (vision tower present but unsupported, Engram unavailable, ...).
  const std::vector<std::string>& notes() const { return notes_; }
  bool engram_active() const { return engram_ != nullptr; }
  // The loaded Engram layout and tables (null without Engram layers), for other backends.
  const V41EngramParts* engram_parts() const { return engram_.get(); }

  // packed: compressed entries as FP4 e2m1 + E4M3 per 16 and index keys as MXFP4 (the QAT
  // storage formats, lossless for the values the forward produces); else fp32 rows.
  V41State new_state(bool packed = false) const;

  // Runs ids at positions state.position … and advances state. Logits of chunk row logit_rows[k]
  // go to logits[k·vocab …). With main_hidden, the bf16 stream means entering each DSpark target
  // layer are written there, [ids.size(), n_targets·hidden] (the DSpark stages' input).
  Status forward(V41State& state, std::span<const int32_t> ids, std::span<const int64_t> logit_rows,
                 float* logits, float* main_hidden = nullptr);

  // One step for several sequences (distinct states): their tokens are stacked, so every weight
  // product (projections, experts grouped over the step's tokens, shared expert, Engram, head)
  // runs once for the small segments together (GEMV calls of at most 11 rows; a segment of more
  // rows runs alone), while attention, compressors, windows and the Engram n-grams work per
  // sequence. Each sequence's logits equal those of forward() on it alone, bitwise.
  Status forward_batch(std::span<const V41BatchSequence> batch);

 private:
  V41Model() = default;
  Status run_batch(std::span<const V41BatchSequence> batch, float* main_hidden);

  V41Config config_;
  Checkpoint checkpoint_;
  V41Weights weights_;
  RopeTable main_rope_, compress_rope_;
  std::vector<std::string> notes_;
  std::unique_ptr<cpu::ThreadPool> pool_;
  std::unique_ptr<V41Workspace> ws_;
  std::unique_ptr<V41EngramParts> engram_;
};

}  // namespace deepinfer::model::v41
