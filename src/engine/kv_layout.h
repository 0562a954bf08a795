// KV bytes of DeepSeek V4 per layer kind (architecture spec §7): fp32 rows (the exact numerics),
// the lossless packed formats of §7.2 (FP8 no-RoPE + BF16 RoPE + UE8M0 scales per main row, MXFP4
// indexer rows; what the official numerics store) and as laid out in the engine's KV blocks.
// Growing per-token parts and the bounded per-sequence parts (window rings, compressor tails) are
// reported apart.
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

V4KvBytes v4_kv_bytes_stored(const model::ModelConfig& config);  // fp32 rows (exact numerics)
V4KvBytes v4_kv_bytes_packed(const model::ModelConfig& config);  // §7.2 packed rows, fp32 tails

// As V4ModelRunner lays the entries out in its KV blocks of `block_size` positions: per
// compressed layer max(1, block_size / ratio) rows per block, each store's region 8-byte
// aligned. With block_size < ratio a block holds one row slot that only every (ratio /
// block_size)-th block fills, so per_token exceeds the dense figure; block_size a multiple of
// every ratio (128 for V4) reaches it. Rows are packed (§7.2) or fp32. block_bytes is one block.
struct V4BlockBytes {
  V4KvBytes per_token;  // csa/hca/per_token as stored in blocks; rings and tails (fp32) as above
  int64_t block_bytes = 0;
};
V4BlockBytes v4_kv_bytes_in_blocks(const model::ModelConfig& config, int32_t block_size,
                                   bool packed);

}  // namespace deepinfer::engine
