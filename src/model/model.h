// DeepSeek V4 on the CPU: Model::load(dir) reads config.json + safetensors (mapped, zero copy);
// forward() runs a chunk of tokens from state.position onward (prefill, chunked prefill or one
// decode step: the same code), advances the per-sequence state and returns logits at the rows
// asked for. Exact numerics (fp32 math) reproduce HF transformers; see docs/model.md.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "common/result.h"
#include "model/config.h"
#include "model/rope.h"
#include "model/safetensors.h"
#include "model/state.h"
#include "model/weights.h"

namespace deepinfer::model {

struct ModelOptions {
  int threads = 1;
  // forward_batch keeps every row's result bitwise independent of the rest of the batch (small
  // segments share GEMV calls, long ones run alone); false: one GEMM per weight for all rows.
  bool batch_invariant = true;
};

// One sequence of a batched step: ids at positions state->position, …; logits of chunk rows
// logit_rows[k] go to logits[k·vocab …).
struct BatchSequence {
  SequenceState* state = nullptr;
  std::span<const int32_t> ids;
  std::span<const int64_t> logit_rows;
  float* logits = nullptr;
};

struct Workspace;

class Model {
 public:
  static Result<std::unique_ptr<Model>> load(const std::string& dir,
                                             const ModelOptions& options = {});
  ~Model();

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }

  // A fresh state for one sequence (position 0). Its compressed entries are stored packed
  // (spec §7.2: FP8 main rows, MXFP4 index keys; lossless, the official numerics round them onto
  // those grids) under the official numerics unless pack_entries is false, fp32 otherwise.
  SequenceState new_state(bool pack_entries = true) const;
  EntryFormat entry_format(bool index_keys, bool pack = true) const;

  // Runs ids (at positions state.position, state.position+1, …) through the model and advances
  // state. For each k, logits of chunk row logit_rows[k] go to logits[k·vocab …). Not
  // thread-safe: one forward at a time per Model.
  // With `streams`, the final hyper-connection streams of every input token (before hc_head,
  // [ids.size(), hc_mult·hidden]) are written there too: the MTP block's input.
  Status forward(SequenceState& state, std::span<const int32_t> ids,
                 std::span<const int64_t> logit_rows, float* logits, float* streams = nullptr);

  // One step for several sequences (distinct states): their tokens are stacked, so every weight
  // GEMM runs once for all of them, while attention, compressors and windows work per sequence.
  // Each sequence's logits equal those of forward() on it alone (bitwise with batch_invariant).
  Status forward_batch(std::span<const BatchSequence> batch);

  // MTP (next-n) block 0 (spec §6.10), when the checkpoint has mtp.* tensors. Chunk row t takes
  // the main model's final streams at position state.position + t (from forward's `streams`) and
  // the token at the next position, and gives the logits of the token after that. A separate
  // state (its own sliding window) advances like the main one.
  bool has_mtp() const { return !weights_.mtp.empty(); }
  SequenceState new_mtp_state() const;
  Status forward_mtp(SequenceState& state, std::span<const float> streams,
                     std::span<const int32_t> next_ids, std::span<const int64_t> logit_rows,
                     float* logits);

 private:
  Model() = default;
  friend struct ForwardPass;
  Status run_batch(std::span<const BatchSequence> batch, float* streams);

  ModelConfig config_;
  Checkpoint checkpoint_;
  ModelWeights weights_;
  RopeTable main_rope_, compress_rope_;
  std::unique_ptr<cpu::ThreadPool> pool_;
  std::unique_ptr<Workspace> ws_;
  bool batch_invariant_ = true;
};

}  // namespace deepinfer::model
