// CudaModelRunner implementation.
#include "engine/cuda/cuda_model_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

namespace deepinfer::engine {

Result<CudaKvPlan> plan_cuda_slots(const std::function<int64_t(int64_t)>& slot_bytes,
                                   int64_t kv_cache_memory, int32_t max_num_seqs,
                                   int32_t max_model_len, int32_t block_size) {
  if (max_num_seqs < 1 || block_size < 1 || max_model_len < 2)
    return Error{"cuda kv plan: max_num_seqs, block_size must be >= 1 and max_model_len >= 2"};
  const auto state = [&](int64_t ctx) { return int64_t{max_num_seqs} * slot_bytes(ctx); };
  int64_t ctx = max_model_len;
  if (kv_cache_memory > 0 && state(ctx) > kv_cache_memory) {
    // Slot bytes grow with the context: the largest fitting one by bisection.
    int64_t lo = 1, hi = ctx;
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
                   " CUDA sequence slots: one slot takes at least " +
                   std::to_string(slot_bytes(2)) + " bytes"};
  }
  CudaKvPlan plan;
  plan.max_context = ctx;
  const int64_t blocks = int64_t{max_num_seqs} * ((ctx + block_size - 1) / block_size);
  plan.num_blocks = static_cast<int32_t>(std::min<int64_t>(blocks, INT32_MAX / 2));
  plan.slot_bytes = slot_bytes(ctx);
  plan.state_bytes = state(ctx);
  return plan;
}

Result<CudaKvPlan> plan_cuda_kv(const model::ModelConfig& config, int64_t kv_cache_memory,
                                int32_t max_num_seqs, int32_t max_model_len, int32_t block_size,
                                bool prefix_caching) {
  if (max_num_seqs < 1 || block_size < 1 || max_model_len < 2)
    return Error{"cuda kv plan: max_num_seqs, block_size must be >= 1 and max_model_len >= 2"};
  const cuda::CudaKvBytes b = cuda::cuda_kv_bytes(config, block_size);
  CudaKvPlan plan;
  plan.slot_bytes = b.bounded;
  plan.block_bytes = b.block_entries + (prefix_caching ? b.bounded : 0);
  const int64_t slots = int64_t{max_num_seqs} * plan.slot_bytes;
  const int64_t per_seq = (int64_t{max_model_len} + block_size - 1) / block_size;
  int64_t blocks = int64_t{max_num_seqs} * per_seq;
  if (kv_cache_memory > 0)
    blocks = std::max<int64_t>(0, kv_cache_memory - slots) / std::max<int64_t>(1, plan.block_bytes);
  blocks = std::min<int64_t>(blocks, INT32_MAX / 2);
  plan.max_context = std::min<int64_t>(max_model_len, blocks * block_size);
  if (plan.max_context < 2)
    return Error{"--kv-cache-memory " + std::to_string(kv_cache_memory) +
                 " bytes is too small for " + std::to_string(max_num_seqs) +
                 " CUDA sequence slots of " + std::to_string(plan.slot_bytes) +
                 " bytes and blocks of " + std::to_string(plan.block_bytes) + " bytes"};
  plan.num_blocks = static_cast<int32_t>(blocks);
  plan.state_bytes = slots + blocks * plan.block_bytes;
  return plan;
}

cuda::CudaModelOptions cuda_model_options(const CudaRunnerOptions& options,
                                          int32_t num_state_slots) {
  cuda::CudaModelOptions o;
  o.max_sequences = std::max(1, num_state_slots);
  o.max_context = options.max_context;
  o.max_chunk_tokens = options.max_chunk_tokens;
  o.emulate = options.emulate;
  o.cuda_graphs = options.cuda_graphs;
  o.progress = options.progress;
  return o;
}

int64_t cuda_block_bytes(const cuda::CudaSlotBytes& one_position, int32_t block_size) {
  return static_cast<int64_t>(std::ceil(one_position.entry_bytes_per_position * block_size));
}

CudaModelRunner::CudaModelRunner(const model::Model& cpu, const CudaRunnerOptions& options)
    : cpu_(&cpu), config_(cpu.config()), options_(options) {}

int64_t CudaModelRunner::bytes_per_block(int32_t block_size) const {
  const cuda::CudaKvBytes b = cuda::cuda_kv_bytes(config_, block_size);
  return b.block_entries + (options_.prefix_caching ? b.bounded : 0);
}

int64_t CudaModelRunner::bytes_per_slot() const { return cuda::cuda_kv_bytes(config_, 1).bounded; }

Status CudaModelRunner::allocate(const KvCacheConfig& config) {
  if (model_) return Error{"cuda runner: allocate() called twice"};
  if (!cpu_) return Error{"cuda runner: no model"};
  cuda::CudaModelOptions o = cuda_model_options(options_, config.num_state_slots);
  o.block_size = config.block_size;
  o.num_blocks = config.num_blocks;
  o.block_snapshots = options_.prefix_caching && config.prefix_caching;
  auto m = cuda::CudaModel::from_model(*cpu_, o);
  if (!m.ok()) return m.error();
  model_ = std::move(m.value());
  cpu_ = nullptr;  // the weights live on the device now
  num_slots_ = o.max_sequences;
  paging_ = {config.block_size, o.block_snapshots, batch_prefill_enabled(options_)};
  const size_t slots = static_cast<size_t>(o.max_sequences);
  scratch_.dec_slots.reserve(slots);
  scratch_.dec_ids.reserve(slots);
  scratch_.dec_rows.reserve(slots);
  scratch_.dec_argmax.reserve(slots);
  return Status::Ok();
}

Status CudaModelRunner::execute(std::span<const RunnerSequence> batch, std::span<float> logits) {
  if (!model_) return Error{"cuda runner: allocate() was not called"};
  return run_slot_step(*model_, num_slots_, options_.max_context, config_.vocab_size, scratch_,
                       batch, logits, {}, paging_);
}

bool device_sampling_enabled(const CudaRunnerOptions& options) {
  static const bool env_off = [] {
    const char* v = std::getenv("DEEPINFER_CUDA_DEVICE_SAMPLING");
    return v && std::string(v) == "0";
  }();
  return options.device_sampling && !options.emulate && !env_off;
}

bool batch_prefill_enabled(const CudaRunnerOptions& options) {
  static const bool env_off = [] {
    const char* v = std::getenv("DEEPINFER_CUDA_BATCH_PREFILL");
    return v && std::string(v) == "0";
  }();
  return options.batch_prefill && !env_off;
}

bool CudaModelRunner::samples_on_device() const { return device_sampling_enabled(options_); }

Status CudaModelRunner::execute_sampling(std::span<const RunnerSequence> batch,
                                         std::span<float> logits, std::span<int32_t> tokens) {
  if (!model_) return Error{"cuda runner: allocate() was not called"};
  return run_slot_step(*model_, num_slots_, options_.max_context, config_.vocab_size, scratch_,
                       batch, logits, tokens, paging_);
}

}  // namespace deepinfer::engine
