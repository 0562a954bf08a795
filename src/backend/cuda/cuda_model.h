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
// Whether a GEMV-sized decode step runs the kv norm, the compressors and the indexer on a second
// stream beside wq_b and the q head norm (they read only the earlier products; on by default,
// env DEEPINFER_CUDA_ATTN_OVERLAP=0 turns it off; H100: 1.33 vs 1.34 ms a step). The same bits
// either way.
void set_attention_overlap(bool on);
bool attention_overlap();

// Device bytes of one sequence slot, as a model that keeps fixed slots allocates them (V4.1): the
// bounded part (window rings, compressor tails) and the compressed-entry stores sized for
// max_context positions; entry_bytes_per_position is that store's amortized cost per position.
struct CudaSlotBytes {
  int64_t bounded = 0;
  int64_t entries = 0;
  double entry_bytes_per_position = 0.0;
  int64_t total() const { return bounded + entries; }
};

// Device bytes of CudaModel's KV state, as it allocates them: a state slot's bounded part (window
// rings, compressor tails; also what one block snapshot takes) and the compressed entries of one
// paged block of block_size positions (every store, max(1, block_size / ratio) rows each).
struct CudaKvBytes {
  int64_t bounded = 0;
  int64_t block_entries = 0;
};
CudaKvBytes cuda_kv_bytes(const model::ModelConfig& config, int32_t block_size);
// The block size CudaModel takes when none is given: the smallest multiple of every compress
// ratio (128 for V4), where the paged stores are as dense as unpaged ones.
int32_t cuda_default_block_size(const model::ModelConfig& config);

struct CudaModelOptions {
  int max_sequences = 1;           // sequence slots (the largest decode batch)
  int64_t max_context = 8192;      // positions per sequence (sizes the compressed-entry stores)
  int64_t max_chunk_tokens = 512;  // tokens per forward launch (longer prefills are chunked)
  bool emulate = false;            // run every kernel body on the host (tests without a GPU; slow)
  bool cuda_graphs = true;         // replay one-token decode steps as a CUDA graph per batch size
  bool progress = false;           // a progress bar on stderr while the weights upload
  // The entry stores are paged (kv_pages.cuh): num_blocks blocks of block_size positions, mapped
  // to each slot through its block table (set_block_table). block_size 0: the default one;
  // num_blocks 0: max_sequences · ceil(max_context / block_size), each slot's table preset to
  // blocks of its own (so a caller that never sets tables sees fixed slots).
  int32_t block_size = 0;
  int32_t num_blocks = 0;
  bool block_snapshots = false;  // room for one bounded-state snapshot per block (prefix caching)
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

  // Slot seq's block table: block ids < num_blocks() covering the positions it will run (the
  // engine's table; shared blocks hold entries other slots wrote). Uploaded with the next launch.
  Status set_block_table(int seq, std::span<const int32_t> table);
  int32_t block_size() const;
  int32_t num_blocks() const;
  // With block_snapshots: slot seq's bounded state (window rings, compressor tails) saved as
  // block's snapshot, and a snapshot put back into slot seq at `position` (a prefix hit: the
  // entries below it are read through the slot's block table).
  Status save_snapshot(int seq, int32_t block);
  Status restore_snapshot(int32_t block, int seq, int64_t position);

  // Runs ids through slot `seq` from its position onward (prefill, chunked prefill, or a
  // one-token step). For each k, the logits of chunk row logit_rows[k] go to host memory
  // logits[k·vocab …) (logits may be null when logit_rows is empty).
  Status prefill(int seq, std::span<const int32_t> ids, std::span<const int64_t> logit_rows,
                 float* logits);

  // Prefills prompts[i] into distinct slots seqs[i] (each from its position), packing pieces of
  // several prompts into launches of up to max_chunk_tokens rows. logits (host, may be null) gets
  // each prompt's last row at [i · vocab …).
  Status prefill_batch(std::span<const int> seqs, std::span<const std::span<const int32_t>> prompts,
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
