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
};

struct Workspace;

class Model {
 public:
  static Result<std::unique_ptr<Model>> load(const std::string& dir, const ModelOptions& options = {});
  ~Model();

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }

  // A fresh state for one sequence (position 0).
  SequenceState new_state() const;

  // Runs ids (at positions state.position, state.position+1, …) through the model and advances
  // state. For each k, logits of chunk row logit_rows[k] go to logits[k·vocab …). Not
  // thread-safe: one forward at a time per Model.
  Status forward(SequenceState& state, std::span<const int32_t> ids,
                 std::span<const int64_t> logit_rows, float* logits);

 private:
  Model() = default;
  friend struct ForwardPass;

  ModelConfig config_;
  Checkpoint checkpoint_;
  ModelWeights weights_;
  RopeTable main_rope_, compress_rope_;
  std::unique_ptr<cpu::ThreadPool> pool_;
  std::unique_ptr<Workspace> ws_;
};

}  // namespace deepinfer::model
