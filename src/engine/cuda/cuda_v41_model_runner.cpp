// CudaV41ModelRunner implementation.
#include "engine/cuda/cuda_v41_model_runner.h"

namespace deepinfer::engine {

Result<CudaKvPlan> plan_cuda_v41_kv(const model::v41::V41Config& config, int64_t kv_cache_memory,
                                    int32_t max_num_seqs, int32_t max_model_len,
                                    int32_t block_size) {
  return plan_cuda_slots(
      [&](int64_t ctx) { return cuda::cuda_v41_slot_bytes(config, ctx).total(); }, kv_cache_memory,
      max_num_seqs, max_model_len, block_size);
}

CudaV41ModelRunner::CudaV41ModelRunner(const model::v41::V41Model& cpu,
                                       const CudaRunnerOptions& options)
    : cpu_(&cpu), options_(options) {}

int64_t CudaV41ModelRunner::bytes_per_block(int32_t block_size) const {
  return cuda_block_bytes(cuda::cuda_v41_slot_bytes(cpu_->config(), 1), block_size);
}

int64_t CudaV41ModelRunner::bytes_per_slot() const {
  return cuda::cuda_v41_slot_bytes(cpu_->config(), 1).bounded;
}

Status CudaV41ModelRunner::allocate(const KvCacheConfig& config) {
  if (model_) return Error{"cuda runner: allocate() called twice"};
  const cuda::CudaModelOptions o = cuda_model_options(options_, config.num_state_slots);
  auto m = cuda::CudaV41Model::from_model(*cpu_, o);
  if (!m.ok()) return m.error();
  model_ = std::move(m.value());
  num_slots_ = o.max_sequences;
  return Status::Ok();
}

Status CudaV41ModelRunner::execute(std::span<const RunnerSequence> batch, std::span<float> logits) {
  if (!model_) return Error{"cuda runner: allocate() was not called"};
  return run_slot_step(*model_, num_slots_, options_.max_context, cpu_->config().vocab_size,
                       scratch_, batch, logits);
}

Status CudaV41ModelRunner::execute_sampling(std::span<const RunnerSequence> batch,
                                            std::span<float> logits, std::span<int32_t> tokens) {
  if (!model_) return Error{"cuda runner: allocate() was not called"};
  return run_slot_step(*model_, num_slots_, options_.max_context, cpu_->config().vocab_size,
                       scratch_, batch, logits, tokens);
}

}  // namespace deepinfer::engine
