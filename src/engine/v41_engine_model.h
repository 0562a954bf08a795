// EngineModel: a model folder loaded for the engine, DeepSeek V4 (model::Model + V4ModelRunner) or
// V4.1 (model::v41::V41Model + V41ModelRunner), picked from config.json (architectures /
// model_type, as `deepinfer score` does), with the facts the CLI needs (vocabulary, BOS/EOS ids).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/model_runner.h"
#include "model/model.h"
#include "model/v41_model.h"

namespace deepinfer::engine {

struct EngineModel {
  std::unique_ptr<model::Model> v4;
  std::unique_ptr<model::v41::V41Model> v41;
  std::unique_ptr<ModelRunner> runner;  // the CPU runner over whichever model is loaded
  int32_t vocab_size = 0;
  int32_t num_layers = 0;
  int32_t bos_token_id = 0;
  std::vector<int> eos_token_ids;
  std::vector<std::string> notes;  // load notes (V4.1: vision tower unsupported, ...)

  bool is_v41() const { return v41 != nullptr; }
};

// True when dir/config.json names the V4.1 architecture (unreadable or invalid: false).
bool is_v41_model_folder(const std::string& dir);

// Loads the folder's model with `threads` CPU threads and its CPU runner (default options);
// v4_runner = false leaves `runner` empty for a V4 model (the caller picks its device runner).
Result<EngineModel> load_engine_model(const std::string& dir, int threads, bool v4_runner = true);

}  // namespace deepinfer::engine
