// Per-sequence decoding state of the V4 forward (spec §7.1), as plain data an engine's KV
// manager can own, page, copy or snapshot: per block a sliding-window ring of kv rows, the
// compressor tails, the compressed entries and (CSA) the indexer keys; all fp32.
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer::model {

// Streaming state of one compressor (spec §6.4): the (a, g + ape) rows of the block being
// filled and, when overlapping (ratio 4), of the previous complete block.
struct CompressorState {
  int ratio = 0;         // tokens per compressed entry
  int width = 0;         // coff · d_c: the width of one (a | g) row
  bool overlap = false;  // ratio 4: entry j pools blocks j−1 (first half) and j (second half)
  // [rows, width] with rows = ratio (plain) or 2·ratio (overlap: rows [0, r) = previous block,
  // rows [r, 2r) = current block at r + p mod r). Scores start at −inf.
  std::vector<float> kv, score;
};

struct BlockState {
  int window = 0;  // sliding_window
  int head_dim = 0;
  std::vector<float> ring;     // [window, head_dim]: row p mod window holds kv(p), positions < next
  CompressorState compressor;  // ratio > 0
  CompressorState index_compressor;  // CSA only
  int64_t n_compressed = 0;          // entries emitted: entry j covers positions [r·j, r·j + r)
  std::vector<float> compressed;     // [n_compressed, head_dim] (after norm, RoPE at r·j)
  int index_head_dim = 0;
  std::vector<float> index_keys;  // [n_compressed, index_head_dim] (CSA)
};

// One sequence: `position` tokens have been processed; blocks[i] belongs to decoder block i.
struct SequenceState {
  int64_t position = 0;
  std::vector<BlockState> blocks;
};

}  // namespace deepinfer::model
