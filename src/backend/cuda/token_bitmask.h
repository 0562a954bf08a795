// Structured-output token masks applied to logits that live on the GPU: the batch's allowed-token
// bitmasks are written into one pinned staging buffer (allocated once), uploaded with ONE
// host-to-device copy per step, and one kernel sets every disallowed logit of [rows, V] to -inf
// in place. The same kernel body runs on the host (emulate) for tests without a GPU. No CUDA
// types in this header.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "common/result.h"

namespace deepinfer::cuda {

// The engine's mask layout (engine/structured_mask.h): bit t of 64-bit word t / 64 set = token t
// allowed; bits at and past the vocabulary size are ignored. On a little-endian host this is the
// same byte image as 32-bit words (bit t of word t / 32).
inline int64_t token_bitmask_words(int64_t vocab_size) { return (vocab_size + 63) / 64; }

struct TokenBitmaskOptions {
  int max_rows = 1;        // the largest batch (rows of logits) one apply() masks
  int64_t vocab_size = 0;  // V: tokens per row
  bool emulate = false;    // host memory and host loops (tests without a GPU)
  void* stream = nullptr;  // cudaStream_t to copy and launch on (null: the default stream)
};

class TokenBitmask {
 public:
  // Allocates the pinned staging buffer and the device copy (both sized for max_rows).
  static Result<std::unique_ptr<TokenBitmask>> create(const TokenBitmaskOptions& options);
  ~TokenBitmask();
  TokenBitmask(const TokenBitmask&) = delete;
  TokenBitmask& operator=(const TokenBitmask&) = delete;

  int64_t vocab_size() const;
  int64_t words_per_row() const;  // token_bitmask_words(vocab_size)
  int max_rows() const;

  // Row r's staged mask (words_per_row() words of pinned memory): a matcher fills it in place
  // (GrammarMatcher::fill_mask writes this layout), which marks the row constrained. Waits for the
  // previous step's upload to finish reading the staging buffer first (no race with the copy).
  std::span<uint64_t> row(int r);
  // Copies a mask into row r (mask.size() must be words_per_row()).
  Status stage(int r, std::span<const uint64_t> mask);
  // Row r has no constraint: the kernel leaves its logits untouched (its words are not read).
  // Every row starts unconstrained, and apply() puts all rows back to unconstrained afterwards.
  void set_unconstrained(int r);

  // For rows [0, rows): one host-to-device copy of the staged flags + masks, then one kernel that
  // writes -inf to every disallowed logit of `logits` (device memory, or host memory when
  // emulated; row r starts at logits + r * row_stride, row_stride >= vocab_size). Asynchronous on
  // the stream (emulated: done on return); no allocation.
  Status apply(float* logits, int rows, int64_t row_stride);
  // Waits for the stream and reports the first CUDA error seen.
  Status synchronize();

  struct Impl;

 private:
  explicit TokenBitmask(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer::cuda
