// KV bytes of DeepSeek V4 per layer kind (architecture spec §7): as model::SequenceState
// stores them (fp32 rows) and in the lossless packed formats of §7.2 (the target: FP8 no-RoPE
// + BF16 RoPE + UE8M0 scales per main row, MXFP4 indexer rows). Growing per-token parts and the
// bounded per-sequence parts (window rings, compressor tails) are reported apart.
#pragma once

#include <cstdint>

#include "model/config.h"

namespace deepinfer::engine {

struct V4KvBytes {
  // Bytes per token per layer, for the growing compressed caches.
  double csa_per_token = 0;  // main entry + index key, every 4 tokens
  double hca_per_token = 0;  // main entry every 128 tokens
  double swa_per_token = 0;  // none: the window is bounded
  double per_token = 0;      // summed over the model's layers
  // Bounded state of one sequence: rings (every layer) + compressor tails.
  int64_t ring_bytes = 0;
  int64_t tail_bytes = 0;
};

V4KvBytes v4_kv_bytes_stored(const model::ModelConfig& config);  // fp32, as model::SequenceState
V4KvBytes v4_kv_bytes_packed(const model::ModelConfig& config);  // §7.2 packed rows, fp32 tails

}  // namespace deepinfer::engine
