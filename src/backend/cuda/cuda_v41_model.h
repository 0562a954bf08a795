// DeepSeek V4.1 (spec §12) on one CUDA GPU: the forward of model::v41::V41Model (the CPU
// reference) step for step, with the weights uploaded as shipped (bf16, FP8 e4m3 in 32×32 UE8M0
// blocks, FP4 e2m1 experts with E8M0 per 32) and fixed sequence slots whose state (window rings,
// the kv sources' compressor tails and compressed entries, index keys, Engram recent ids) lives on
// the device. The DSpark stages are not run here. No CUDA types in this header.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "backend/cuda/cuda_model.h"
#include "common/result.h"
#include "model/v41_config.h"

namespace deepinfer::model::v41 {
class V41Model;
struct V41Weights;
struct V41EngramParts;
}  // namespace deepinfer::model::v41

namespace deepinfer::cuda {

// Device bytes of one V4.1 sequence slot as CudaV41Model allocates them: the bounded part (window
// rings of every layer, the ratio-2 compressor tails) and the kv sources' entry stores
// (compressed entries, index keys) for max_context positions.
CudaSlotBytes cuda_v41_slot_bytes(const model::v41::V41Config& config, int64_t max_context);

class CudaV41Model {
 public:
  // Loads a V4.1 folder (through model::v41::V41Model) and uploads it.
  static Result<std::unique_ptr<CudaV41Model>> load(const std::string& dir,
                                                    const CudaModelOptions& options = {});
  // Uploads an already loaded CPU model (it must outlive this call only: the Engram layout the
  // host-side hash needs is copied).
  static Result<std::unique_ptr<CudaV41Model>> from_model(const model::v41::V41Model& cpu,
                                                          const CudaModelOptions& options = {});
  // From a config and weight views alone (benchmarks of synthetic slices); engram may be null
  // when the config has no Engram layers. The views must outlive this call only.
  static Result<std::unique_ptr<CudaV41Model>> from_parts(const model::v41::V41Config& config,
                                                          const model::v41::V41Weights& weights,
                                                          const model::v41::V41EngramParts* engram,
                                                          const CudaModelOptions& options = {});
  ~CudaV41Model();

  const model::v41::V41Config& config() const;

  // Sequence slots 0 … max_sequences−1; reset() puts a slot back at position 0.
  void reset(int seq);
  int64_t position(int seq) const;

  // Runs ids through slot `seq` from its position on (prefill, chunked prefill or one step);
  // the logits of chunk row logit_rows[k] go to host logits[k·vocab …).
  Status prefill(int seq, std::span<const int32_t> ids, std::span<const int64_t> logit_rows,
                 float* logits);
  // One token for each of B distinct slots; logits (host [B, vocab]) and/or argmax (host [B]) may
  // be null (then nothing is copied back and the step runs asynchronously). With B specs and
  // tokens (host [B]) each row's token is also sampled on the device (sampling.h; not emulated).
  Status decode(std::span<const int> seqs, std::span<const int32_t> ids, float* logits,
                int32_t* argmax, std::span<const SampleSpec> specs = {}, int32_t* tokens = nullptr);
  Status synchronize();

  int64_t weight_bytes() const;
  int64_t state_bytes() const;
  int64_t workspace_bytes() const;

  struct Impl;

 private:
  explicit CudaV41Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer::cuda
