// CudaV41ModelRunner: the engine's ModelRunner over cuda::CudaV41Model (DeepSeek V4.1 on the GPU,
// built only with the CUDA backend), stepping as the V4 CUDA runner (engine/cuda/slot_step.h):
// engine state slot i is device slot i, fixed slots of max_context positions, no prefix caching
// (the device state is neither paged nor snapshotted).
#pragma once

#include <cstdint>
#include <memory>

#include "backend/cuda/cuda_v41_model.h"
#include "common/result.h"
#include "engine/cuda/cuda_model_runner.h"
#include "engine/cuda/slot_step.h"
#include "engine/model_runner.h"
#include "model/v41_model.h"

namespace deepinfer::engine {

// The largest max_context <= max_model_len whose V4.1 slots fit kv_cache_memory (0: no budget).
Result<CudaKvPlan> plan_cuda_v41_kv(const model::v41::V41Config& config, int64_t kv_cache_memory,
                                    int32_t max_num_seqs, int32_t max_model_len,
                                    int32_t block_size);

class CudaV41ModelRunner : public ModelRunner {
 public:
  // `cpu` holds the weights and the Engram tables; it must outlive the runner.
  CudaV41ModelRunner(const model::v41::V41Model& cpu, const CudaRunnerOptions& options);

  int32_t vocab_size() const override { return cpu_->config().vocab_size; }
  int64_t bytes_per_block(int32_t block_size) const override;
  int64_t bytes_per_slot() const override;
  bool exact_prefix_snapshots() const override { return false; }
  Status allocate(const KvCacheConfig& config) override;
  Status execute(std::span<const RunnerSequence> batch, std::span<float> logits) override;
  bool samples_on_device() const override { return device_sampling_enabled(options_); }
  Status execute_sampling(std::span<const RunnerSequence> batch, std::span<float> logits,
                          std::span<int32_t> tokens) override;

  cuda::CudaV41Model* cuda_model() { return model_.get(); }

 private:
  const model::v41::V41Model* cpu_;
  CudaRunnerOptions options_;
  std::unique_ptr<cuda::CudaV41Model> model_;
  int num_slots_ = 0;
  SlotStepScratch scratch_;
};

}  // namespace deepinfer::engine
