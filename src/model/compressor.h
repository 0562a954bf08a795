// The KV compressors of CSA/HCA layers (spec §6.4): per token a row (a, g + ape) is pushed into
// the streaming state; when a block of `ratio` tokens closes, the softmax-gated pool over its
// rows (and, overlapping, over the previous block's first half) becomes one compressed entry.
#pragma once

#include <cstdint>

#include "model/forward.h"

namespace deepinfer::model {

// Resets a compressor state for a fresh sequence.
void init_compressor(CompressorState& s, int ratio, int entry_dim, bool overlap);

// Runs the compressor of block `layer` (index_keys: the indexer's) over the step's rows x [n, d]:
// the projections for all rows at once, then each segment's streaming state in order; every
// entry that closes is normalised, RoPE'd at its first position (last rope_pairs·2 dims,
// compress table), given the numerics hook of its kind (kv_rows, or indexer_rows for index keys)
// and appended to that segment's store.
void run_compressor(const ChunkContext& ctx, const CompressorWeights& w, int layer, bool index_keys,
                    int entry_dim, int rope_pairs, const float* x, size_t ws_slot);

}  // namespace deepinfer::model
