// The engine's model runner on the chosen device, for `serve` and `generate --batch`: the CPU
// V4ModelRunner, or (builds with CUDA) the CUDA runner over fixed device slots sized from the KV
// budget. `--device auto` picks cuda when a GPU answers, else cpu, and says which on stderr.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/result.h"
#include "engine/engine.h"
#include "model/model.h"
#include "model/v41_model.h"

namespace deepinfer::cli {

// "cpu" → false. "cuda" → true (an error when the build has no CUDA backend or no device
// answers). "auto" or "" → whether a device answers, logged on stderr as "<who>: --device auto:
// ...". Environment DEEPINFER_CUDA_EMULATE=1 (tests) makes "cuda" run the kernel bodies on the
// host instead of a device.
Result<bool> engine_uses_cuda(const std::string& device, const std::string& who);

// --batch-invariant (serve, generate, score, bench): turns on the CUDA backend's batch-invariant
// mode (backend/cuda/cuda_model.h; env DEEPINFER_BATCH_INVARIANT=1 does the same). Nothing when
// `on` is false; ignored by the CPU device and by builds without CUDA.
void apply_batch_invariant(bool on);
inline constexpr const char* kBatchInvariantHelp =
    "cuda: a row's results do not depend on the other rows of its batch (fixed GEMM algorithms, "
    "no split-K; slower)";

// The runner for `model`. CPU: a V4ModelRunner; `config` unchanged. CUDA: one device slot per
// config.scheduler.max_num_seqs of config.scheduler.max_model_len positions, lowered to the
// largest context whose slots fit kv_budget bytes (0: no budget); sets config.kv.num_blocks to
// the slots' positions and config.kv_cache_memory to 0, and describes the slots in `note`.
Result<std::unique_ptr<engine::ModelRunner>> make_engine_runner(model::Model& model, bool cuda,
                                                                int64_t kv_budget,
                                                                engine::EngineConfig& config,
                                                                std::string& note);

// The CUDA runner for a V4.1 model (CudaV41Model slots sized as for V4 above); an error in builds
// without the CUDA backend.
Result<std::unique_ptr<engine::ModelRunner>> make_cuda_v41_runner(model::v41::V41Model& model,
                                                                  int64_t kv_budget,
                                                                  engine::EngineConfig& config,
                                                                  std::string& note);

}  // namespace deepinfer::cli
