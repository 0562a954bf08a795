// The model backends `deepinfer bench` measures (CPU model, CUDA model) behind one small
// interface: prefill fresh sequences, fill decode slots to a context, run timed decode steps,
// and say how much memory they hold. Every call returns after the device has finished.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cli/bench_cost.h"
#include "common/result.h"
#include "model/config.h"

namespace deepinfer::cli {

struct BenchBackendOptions {
  int threads = 1;              // CPU threads
  int max_batch = 1;            // the largest decode batch (sequence slots)
  int64_t max_context = 0;      // the longest sequence any phase builds
  int64_t chunk_tokens = 8192;  // CUDA: rows per prefill launch
};

class BenchBackend {
 public:
  virtual ~BenchBackend() = default;
  virtual const model::ModelConfig& config() const = 0;
  // "cpu: 16 threads" / "cuda: NVIDIA H200 …".
  virtual std::string device_name() const = 0;

  // One fresh sequence of ids from position 0; logits of the last row only.
  virtual Status prefill(std::span<const int32_t> ids) = 0;
  // Fresh sequences, one per prompt, prefilled together where the backend can (the CUDA model
  // packs them into shared launches); by default one prefill() after the other.
  virtual Status prefill_batch(std::span<const std::vector<int32_t>> prompts) {
    for (const auto& p : prompts) {
      if (Status s = prefill(p); !s) return s;
    }
    return Status::Ok();
  }
  // Slots 0 … batch−1 hold `prompt` afterwards (the cache the decode steps read): one prefill,
  // the other slots copied.
  virtual Status fill(int batch, std::span<const int32_t> prompt) = 0;
  // One decode step for slots 0 … tokens.size()−1 (tokens[b] to slot b).
  virtual Status step(std::span<const int32_t> tokens) = 0;

  // Bytes held: weights (0: the mapped checkpoint itself), per-sequence state, and in all (device
  // memory in use on a GPU, the process's peak RSS on the CPU).
  virtual int64_t weight_bytes() const = 0;
  virtual int64_t state_bytes() const = 0;
  virtual int64_t total_bytes() const = 0;
  // Bytes of one cached row as the backend stores it: window kv row, compressed entry, index key.
  virtual KvRowBytes kv_rows() const = 0;
};

Result<std::unique_ptr<BenchBackend>> make_cpu_backend(const std::string& dir,
                                                       const BenchBackendOptions& options);
// Fails with a message when the build has no CUDA backend or no device answers.
Result<std::unique_ptr<BenchBackend>> make_cuda_backend(const std::string& dir,
                                                        const BenchBackendOptions& options);

// This process's peak resident set (VmHWM), bytes; 0 when unknown.
int64_t peak_rss_bytes();

}  // namespace deepinfer::cli
