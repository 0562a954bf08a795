// CudaV41ModelRunner implementation.
#include "engine/cuda/cuda_v41_model_runner.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace deepinfer::engine {

Result<CudaKvPlan> plan_cuda_v41_kv(const model::v41::V41Config& config, int64_t kv_cache_memory,
                                    int32_t max_num_seqs, int32_t max_model_len,
                                    int32_t block_size) {
  if (max_num_seqs < 1 || block_size < 1 || max_model_len < 2)
    return Error{"cuda kv plan: max_num_seqs, block_size must be >= 1 and max_model_len >= 2"};
  const auto state = [&](int64_t ctx) {
    return int64_t{max_num_seqs} * cuda::cuda_v41_slot_bytes(config, ctx).total();
  };
  int64_t ctx = max_model_len;
  if (kv_cache_memory > 0 && state(ctx) > kv_cache_memory) {
    int64_t lo = 1, hi = ctx;  // slot bytes grow with the context: bisection
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (state(mid) <= kv_cache_memory)
        lo = mid;
      else
        hi = mid - 1;
    }
    ctx = lo;
    if (ctx < 2 || state(ctx) > kv_cache_memory)
      return Error{"--kv-cache-memory " + std::to_string(kv_cache_memory) +
                   " bytes is too small for " + std::to_string(max_num_seqs) +
                   " CUDA sequence slots"};
  }
  CudaKvPlan plan;
  plan.max_context = ctx;
  const int64_t blocks = int64_t{max_num_seqs} * ((ctx + block_size - 1) / block_size);
  plan.num_blocks = static_cast<int32_t>(std::min<int64_t>(blocks, INT32_MAX / 2));
  plan.slot_bytes = cuda::cuda_v41_slot_bytes(config, ctx).total();
  plan.state_bytes = state(ctx);
  return plan;
}

CudaV41ModelRunner::CudaV41ModelRunner(const model::v41::V41Model& cpu,
                                       const CudaRunnerOptions& options)
    : cpu_(&cpu), options_(options) {}

int64_t CudaV41ModelRunner::bytes_per_block(int32_t block_size) const {
  const double per_pos = cuda::cuda_v41_slot_bytes(cpu_->config(), 1).entry_bytes_per_position;
  return static_cast<int64_t>(std::ceil(per_pos * block_size));
}

int64_t CudaV41ModelRunner::bytes_per_slot() const {
  return cuda::cuda_v41_slot_bytes(cpu_->config(), 1).bounded;
}

Status CudaV41ModelRunner::allocate(const KvCacheConfig& config) {
  if (model_) return Error{"cuda runner: allocate() called twice"};
  cuda::CudaModelOptions o;
  o.max_sequences = std::max(1, config.num_state_slots);
  o.max_context = options_.max_context;
  o.max_chunk_tokens = options_.max_chunk_tokens;
  o.emulate = options_.emulate;
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

}  // namespace deepinfer::engine
