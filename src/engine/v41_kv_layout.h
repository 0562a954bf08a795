// KV bytes of DeepSeek V4.1 (architecture spec §12.2 items 3, 4 and 6): only kv-source layers keep
// compressed entries (FP4 e2m1 + E4M3 per 16) and only kv sources that are also index sources
// keep index keys (MXFP4); every layer keeps a window ring (FP8 e4m3 + UE8M0 per 32, bounded).
// Figures per token as the formats store them and as V41ModelRunner lays them out in KV blocks.
#pragma once

#include <cstdint>

#include "model/v41_config.h"

namespace deepinfer::engine {

struct V41KvBytes {
  // Growing part, bytes per token summed over the kv sources (stored once per source group).
  double compressed_per_token = 0;
  double index_keys_per_token = 0;
  double per_token = 0;
  // Bounded part of one sequence.
  int64_t ring_bytes = 0;      // every layer's window ring, packed FP8
  int64_t ring_bytes_f32 = 0;  // the same rings as the CPU forward keeps them (fp32)
  int64_t tail_bytes = 0;      // fp32 compressor tails of the ratio > 1 kv sources
};

// The packed formats, dense (no block rounding).
V41KvBytes v41_kv_bytes_packed(const model::v41::V41Config& config);

// As V41ModelRunner lays the entries out in KV blocks of `block_size` positions (a multiple of
// every compress ratio): per kv source block_size / ratio compressed rows (and index-key rows for
// key owners), each region 8-byte aligned. block_bytes is one block; per_token = block_bytes /
// block_size; the bounded figures as in v41_kv_bytes_packed.
struct V41BlockBytes {
  V41KvBytes per_token;
  int64_t block_bytes = 0;
};
V41BlockBytes v41_kv_bytes_in_blocks(const model::v41::V41Config& config, int32_t block_size,
                                     bool packed = true);

// Bytes of one bounded-state snapshot as V41ModelRunner keeps it per block for exact prefix
// caching: packed rings + fp32 tails + counters and the recent ids.
int64_t v41_snapshot_bytes(const model::v41::V41Config& config);

}  // namespace deepinfer::engine
