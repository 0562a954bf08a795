// CudaModelRunner: the engine's ModelRunner over cuda::CudaModel (built only with the CUDA
// backend). Engine state slot i is CUDA slot i; a sequence's first chunk resets its slot, so a
// slot released by finish, abort or preemption is simply reused. Prompt positions run through
// CudaModel::prefill (one call per sequence and step), every single-token piece of the step
// (decodes, and the generated positions a preempted request recomputes) through one batched
// CudaModel::decode per round. The CUDA state is not paged and not snapshotted: no prefix caching.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/cuda/cuda_model.h"
#include "common/result.h"
#include "engine/cuda/slot_step.h"
#include "engine/model_runner.h"
#include "model/model.h"

namespace deepinfer::engine {

struct CudaRunnerOptions {
  int64_t max_context = 8192;      // positions per slot (>= the engine's max_model_len)
  int64_t max_chunk_tokens = 512;  // tokens per prefill launch
  bool emulate = false;            // host-run kernel bodies (tests without a GPU)
  bool cuda_graphs = true;
  // Decode tokens drawn on the GPU where the parameters allow (device_samplable); env
  // DEEPINFER_CUDA_DEVICE_SAMPLING=0 turns it off (to measure both with one binary).
  bool device_sampling = true;
  bool progress = false;  // a progress bar while the weights upload
};

// Fixed device slots sized for the engine: each of max_num_seqs slots holds max_context
// positions; the engine's block pool covers exactly those positions, so its KV usage is the
// share of the device state in use.
struct CudaKvPlan {
  int64_t max_context = 0;  // becomes the engine's max_model_len
  int32_t num_blocks = 0;   // max_num_seqs · ceil(max_context / block_size)
  int64_t state_bytes = 0;  // device bytes of all slots
  int64_t slot_bytes = 0;   // one slot
};
// The largest max_context <= max_model_len whose slots fit kv_cache_memory (0: no budget).
Result<CudaKvPlan> plan_cuda_kv(const model::ModelConfig& config, int64_t kv_cache_memory,
                                int32_t max_num_seqs, int32_t max_model_len, int32_t block_size);
// The same plan for any slot layout: slot_bytes(max_context) is one slot's device bytes (it grows
// with the context). plan_cuda_kv and plan_cuda_v41_kv bind it to their model's layout.
Result<CudaKvPlan> plan_cuda_slots(const std::function<int64_t(int64_t)>& slot_bytes,
                                   int64_t kv_cache_memory, int32_t max_num_seqs,
                                   int32_t max_model_len, int32_t block_size);

// Shared by the V4 and V4.1 runners: the device model options for `num_state_slots` slots, and
// the amortized bytes of a block of positions in a slot's entry stores.
cuda::CudaModelOptions cuda_model_options(const CudaRunnerOptions& options,
                                          int32_t num_state_slots);
int64_t cuda_block_bytes(const cuda::CudaSlotBytes& one_position, int32_t block_size);
// Whether a CUDA runner with these options samples decode tokens on the device.
bool device_sampling_enabled(const CudaRunnerOptions& options);

class CudaModelRunner : public ModelRunner {
 public:
  // `cpu` holds the weights; it is read in allocate() (the upload) and not needed afterwards.
  CudaModelRunner(const model::Model& cpu, const CudaRunnerOptions& options);

  int32_t vocab_size() const override { return config_.vocab_size; }
  // What a block of positions takes in a slot's entry stores (amortized), and a slot's bounded
  // state (rings, compressor tails); both from the CUDA allocation sizes.
  int64_t bytes_per_block(int32_t block_size) const override;
  int64_t bytes_per_slot() const override;
  bool exact_prefix_snapshots() const override { return false; }
  // Uploads the weights and allocates config.num_state_slots slots of max_context positions.
  Status allocate(const KvCacheConfig& config) override;
  Status execute(std::span<const RunnerSequence> batch, std::span<float> logits) override;
  bool samples_on_device() const override;
  Status execute_sampling(std::span<const RunnerSequence> batch, std::span<float> logits,
                          std::span<int32_t> tokens) override;

  // After allocate(): the device model (weights, state and scratch bytes).
  cuda::CudaModel* cuda_model() { return model_.get(); }
  const CudaRunnerOptions& options() const { return options_; }

 private:
  const model::Model* cpu_;
  model::ModelConfig config_;
  CudaRunnerOptions options_;
  std::unique_ptr<cuda::CudaModel> model_;
  int num_slots_ = 0;
  SlotStepScratch scratch_;
};

}  // namespace deepinfer::engine
