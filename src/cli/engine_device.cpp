// The engine runner by device (see engine_device.h).
#include "cli/engine_device.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "engine/v4_model_runner.h"
#ifdef DEEPINFER_HAVE_CUDA
#include "backend/cuda/cuda_model.h"
#include "engine/cuda/cuda_model_runner.h"
#include "engine/cuda/cuda_v41_model_runner.h"
#endif

namespace deepinfer::cli {
namespace {

[[maybe_unused]] bool emulate_cuda() {
  const char* e = std::getenv("DEEPINFER_CUDA_EMULATE");
  return e && std::string(e) == "1";
}

[[maybe_unused]] std::string mib(int64_t bytes) {
  return std::to_string((bytes + (1 << 19)) >> 20) + " MiB";
}

// MiB, or KiB below one MiB.
[[maybe_unused]] std::string size_text(int64_t bytes) {
  return bytes < (1 << 20) ? std::to_string((bytes + 512) >> 10) + " KiB" : mib(bytes);
}

#ifdef DEEPINFER_HAVE_CUDA
// Sizes the scheduler and block pool to a CUDA KV plan (V4 and V4.1 alike) and returns the
// runner options; `note` describes the slots, prefixed by `model_label`.
Result<engine::CudaRunnerOptions> fit_to_cuda_kv_plan(const Result<engine::CudaKvPlan>& plan,
                                                      const std::string& model_label,
                                                      engine::EngineConfig& c, std::string& note,
                                                      bool paged = false) {
  if (!plan.ok()) return plan.error();
  const engine::CudaKvPlan& p = plan.value();
  engine::CudaRunnerOptions o;
  o.max_context = p.max_context;
  o.emulate = emulate_cuda();
  o.progress = true;
  const bool lowered = p.max_context < c.scheduler.max_model_len;
  c.scheduler.max_model_len = static_cast<int32_t>(p.max_context);
  c.kv.num_blocks = p.num_blocks;
  c.kv_cache_memory = 0;
  o.prefix_caching = paged && c.kv.prefix_caching;
  if (paged)
    note = "cuda: " + model_label + std::to_string(c.scheduler.max_num_seqs) + " sequence slots, " +
           std::to_string(p.num_blocks) + " KV blocks of " + std::to_string(c.kv.block_size) +
           " positions (" + size_text(p.block_bytes) + " each" +
           (o.prefix_caching ? " with its prefix-cache snapshot" : "") + "), " +
           mib(p.state_bytes) + " of KV state" +
           (lowered ? " (max_model_len lowered to fit the KV budget)" : "") +
           (o.prefix_caching ? ", prefix cache on" : ", no prefix cache");
  else
    note = "cuda: " + model_label + std::to_string(c.scheduler.max_num_seqs) +
           " sequence slots x " + std::to_string(p.max_context) + " positions, " +
           mib(p.state_bytes) + " of KV state" +
           (lowered ? " (max_model_len lowered to fit the KV budget)" : "") + ", no prefix cache";
  if (o.emulate) note += ", emulated on the host";
  return o;
}
#endif

}  // namespace

Result<bool> engine_uses_cuda(const std::string& device, const std::string& who) {
  if (device == "cpu") return false;
  if (device != "cuda" && device != "auto" && !device.empty())
    return Error{"--device must be cpu, cuda or auto (got '" + device + "')"};
#ifdef DEEPINFER_HAVE_CUDA
  const bool have = emulate_cuda() || cuda::device_available();
  if (device == "cuda") {
    if (!have) return Error{"--device cuda: " + cuda::device_name()};
    return true;
  }
  std::cerr << who << ": --device auto: "
            << (have ? "cuda (" +
                           (emulate_cuda() ? std::string("emulated on the host")
                                           : cuda::device_name()) +
                           ")"
                     : "cpu (" + cuda::device_name() + ")")
            << "\n";
  return have;
#else
  if (device == "cuda") return Error{"--device cuda: this build has no CUDA backend"};
  std::cerr << who << ": --device auto: cpu (this build has no CUDA backend)\n";
  return false;
#endif
}

void apply_batch_invariant([[maybe_unused]] bool on) {
#ifdef DEEPINFER_HAVE_CUDA
  if (on) cuda::set_batch_invariant(true);
#endif
}

Result<std::unique_ptr<engine::ModelRunner>> make_engine_runner(model::Model& model, bool cuda,
                                                                [[maybe_unused]] int64_t kv_budget,
                                                                engine::EngineConfig& config,
                                                                std::string& note) {
  if (!cuda) return std::unique_ptr<engine::ModelRunner>(new engine::V4ModelRunner(model));
#ifdef DEEPINFER_HAVE_CUDA
  engine::EngineConfig& c = config;
  auto o = fit_to_cuda_kv_plan(
      engine::plan_cuda_kv(model.config(), kv_budget, c.scheduler.max_num_seqs,
                           c.scheduler.max_model_len, c.kv.block_size, c.kv.prefix_caching),
      "", c, note, /*paged=*/true);
  if (!o.ok()) return o.error();
  // One prefill launch per step: every launch streams all the weights again, so a step's prompt
  // pieces (at most max_num_batched_tokens rows) go through at once (its scratch grows with it).
  o.value().max_chunk_tokens =
      std::max<int64_t>(o.value().max_chunk_tokens, c.scheduler.max_num_batched_tokens);
  return std::unique_ptr<engine::ModelRunner>(new engine::CudaModelRunner(model, o.value()));
#else
  (void)config;
  (void)note;
  return Error{"--device cuda: this build has no CUDA backend"};
#endif
}

Result<std::unique_ptr<engine::ModelRunner>> make_cuda_v41_runner(
    [[maybe_unused]] model::v41::V41Model& model, [[maybe_unused]] int64_t kv_budget,
    [[maybe_unused]] engine::EngineConfig& config, [[maybe_unused]] std::string& note) {
#ifdef DEEPINFER_HAVE_CUDA
  engine::EngineConfig& c = config;
  auto o = fit_to_cuda_kv_plan(
      engine::plan_cuda_v41_kv(model.config(), kv_budget, c.scheduler.max_num_seqs,
                               c.scheduler.max_model_len, c.kv.block_size),
      "V4.1, ", c, note);
  if (!o.ok()) return o.error();
  return std::unique_ptr<engine::ModelRunner>(new engine::CudaV41ModelRunner(model, o.value()));
#else
  return Error{"--device cuda: this build has no CUDA backend"};
#endif
}

}  // namespace deepinfer::cli
