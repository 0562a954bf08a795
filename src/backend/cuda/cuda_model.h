// DeepSeek V4 on one CUDA GPU: the forward of src/model (the CPU reference) with the weights
// uploaded as shipped (bf16/fp32, FP8 128×128 blocks, FP4 ×32 stay packed in device memory) and a
// fixed number of sequence slots whose decode state (window ring, compressor tails, compressed
// entries, index keys) lives on the device. Exact numerics for plain checkpoints, DeepSeek's
// official roundings for quantized ones, as the CPU model. No CUDA types in this header.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "backend/cuda/sampling.h"
#include "common/result.h"
#include "model/config.h"

namespace deepinfer::model {
class Model;
}

namespace deepinfer::cuda {

// True when the build has CUDA and a device answers.
bool device_available();
// One line naming the device (or why there is none).
std::string device_name();

// Batch-invariant mode (env DEEPINFER_BATCH_INVARIANT=1, or the CLI's --batch-invariant): every
// product and reduction of a row gives the same bits whatever other rows share its launch
// (decode batch, prefill chunk). Matrix products then take one fixed cuBLASLt algorithm per
// weight shape with no split-K for every row count, or GEMV passes whose kernel does not depend
// on the row count; attention, norms and the routed experts already work per row. Set it before
// the first forward; it holds for the whole process.
void set_batch_invariant(bool on);
bool batch_invariant();
// Whether products with more rows than the GEMV passes take (64) run through cuBLASLt (default
// on; env DEEPINFER_CUDA_LT=0 keeps the older tiled kernels, which tests compare against).
void set_lt_gemm(bool on);
bool lt_gemm();

// Device bytes of one sequence slot, as CudaModel allocates them: the bounded part (window
// rings, compressor tails) and the compressed-entry stores (CSA / HCA entries, index keys) sized
// for max_context positions; entry_bytes_per_position is that store's amortized cost per position.
struct CudaSlotBytes {
  int64_t bounded = 0;
  int64_t entries = 0;
  double entry_bytes_per_position = 0.0;
  int64_t total() const { return bounded + entries; }
};
CudaSlotBytes cuda_slot_bytes(const model::ModelConfig& config, int64_t max_context);

struct CudaModelOptions {
  int max_sequences = 1;           // sequence slots (the largest decode batch)
  int64_t max_context = 8192;      // positions per sequence (sizes the compressed-entry stores)
  int64_t max_chunk_tokens = 512;  // tokens per forward launch (longer prefills are chunked)
  bool emulate = false;            // run every kernel body on the host (tests without a GPU; slow)
  bool cuda_graphs = true;         // replay one-token decode steps as a CUDA graph per batch size
  bool progress = false;           // a progress bar on stderr while the weights upload
};

class CudaModel {
 public:
  // Loads config + checkpoint from a model folder (through model::Model) and uploads it.
  static Result<std::unique_ptr<CudaModel>> load(const std::string& dir,
                                                 const CudaModelOptions& options = {});
  // Uploads the weights of an already loaded CPU model (the checkpoint mapping must outlive
  // this call only).
  static Result<std::unique_ptr<CudaModel>> from_model(const model::Model& cpu,
                                                       const CudaModelOptions& options = {});
  ~CudaModel();

  const model::ModelConfig& config() const;

  // Sequence slots 0 … max_sequences−1. reset() puts a slot back at position 0.
  void reset(int seq);
  int64_t position(int seq) const;
  // Copies slot src's whole state (rings, compressor tails, entries, position) into slot dst, so
  // that dst continues exactly as src would (fills decode batches without re-running prefills).
  Status copy_slot(int src, int dst);

  // Runs ids through slot `seq` from its position onward (prefill, chunked prefill, or a
  // one-token step). For each k, the logits of chunk row logit_rows[k] go to host memory
  // logits[k·vocab …) (logits may be null when logit_rows is empty).
  Status prefill(int seq, std::span<const int32_t> ids, std::span<const int64_t> logit_rows,
                 float* logits);

  // One decode step for B distinct slots: ids[b] at position(seqs[b]). logits (host, [B, vocab])
  // and/or argmax (host, [B]) may be null; with both null nothing is copied back and the step
  // runs asynchronously (call synchronize() to wait, e.g. around a timing loop). With B specs and
  // tokens (host, [B]), each row's token is also sampled on the device (sampling.h; not emulated:
  // there tokens are left as they are).
  Status decode(std::span<const int> seqs, std::span<const int32_t> ids, float* logits,
                int32_t* argmax, std::span<const SampleSpec> specs = {}, int32_t* tokens = nullptr);
  Status synchronize();

  // Device memory held: weights as shipped, per-sequence state, scratch.
  int64_t weight_bytes() const;
  int64_t state_bytes() const;
  int64_t workspace_bytes() const;
  int64_t device_bytes() const { return weight_bytes() + state_bytes() + workspace_bytes(); }

  struct Impl;

 private:
  explicit CudaModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer::cuda
