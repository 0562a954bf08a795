// CudaModelRunner: the engine's ModelRunner over cuda::CudaModel (built only with the CUDA
// backend). Engine state slot i is CUDA slot i and holds the bounded state (window rings,
// compressor tails); the compressed entries live in the engine's KV blocks on the device, read and
// written through each sequence's block table (backend/cuda/kv_pages.cuh). A sequence's first
// chunk resets its slot, or on a prefix-cache hit restores the bounded-state snapshot saved at the
// end of the last hit block; shared blocks' entries are read, never rewritten. Prompt positions
// run through CudaModel::prefill_batch (a round's pieces of all sequences packed into shared
// launches; with prefix caching pieces end at block boundaries, as in the CPU runner), every
// single-token piece of the step (decodes, and the generated positions a preempted request
// recomputes) through one batched CudaModel::decode.
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
  // Exact prefix caching: a bounded-state snapshot per block on the device (bytes_per_block
  // counts it). Off: exact_prefix_snapshots() is false and no snapshot memory is taken.
  bool prefix_caching = true;
  // A step's prompt pieces of all sequences through one CudaModel::prefill_batch (shared launches
  // of up to max_chunk_tokens rows) instead of one prefill per sequence; env
  // DEEPINFER_CUDA_BATCH_PREFILL=0 turns it off (to measure both with one binary).
  bool batch_prefill = true;
};

// The device KV state sized for the engine. V4 (paged): max_num_seqs slots of bounded state and a
// pool of num_blocks blocks (entries, and a snapshot each with prefix caching). V4.1 (fixed
// slots): each of max_num_seqs slots holds max_context positions and the pool covers exactly
// those positions.
struct CudaKvPlan {
  int64_t max_context = 0;  // becomes the engine's max_model_len
  int32_t num_blocks = 0;
  int64_t state_bytes = 0;  // device bytes of all slots (and, paged, of the block pool)
  int64_t slot_bytes = 0;   // one slot
  int64_t block_bytes = 0;  // one block (paged)
};
// V4: the blocks that fit kv_cache_memory after the slots (no budget: enough for every slot to
// reach max_model_len); with fewer than one sequence of max_model_len needs, max_context drops
// to what the pool holds.
Result<CudaKvPlan> plan_cuda_kv(const model::ModelConfig& config, int64_t kv_cache_memory,
                                int32_t max_num_seqs, int32_t max_model_len, int32_t block_size,
                                bool prefix_caching);
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
// Whether a CUDA runner with these options prefills a step's prompt pieces in shared launches.
bool batch_prefill_enabled(const CudaRunnerOptions& options);

class CudaModelRunner : public ModelRunner {
 public:
  // `cpu` holds the weights; it is read in allocate() (the upload) and not needed afterwards.
  CudaModelRunner(const model::Model& cpu, const CudaRunnerOptions& options);

  int32_t vocab_size() const override { return config_.vocab_size; }
  // What a block takes on the device (its entries in every store, and with prefix caching its
  // bounded-state snapshot), and a slot's bounded state (rings, compressor tails); both from the
  // CUDA allocation sizes.
  int64_t bytes_per_block(int32_t block_size) const override;
  int64_t bytes_per_slot() const override;
  bool exact_prefix_snapshots() const override { return options_.prefix_caching; }
  // Uploads the weights and allocates config.num_state_slots slots and config.num_blocks blocks.
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
  SlotPaging paging_;
  SlotStepScratch scratch_;
};

}  // namespace deepinfer::engine
