// Per-sequence decoding state of the V4 forward (spec §7.1), as plain data an engine's KV
// manager can own, page, copy or snapshot: per block a sliding-window ring of kv rows and the
// compressor tails (fp32, bounded), and the growing compressed entries and (CSA) index keys in an
// EntryStore: owned and contiguous, or paged inside an engine's KV blocks through a block table.
#pragma once

#include <cstdint>
#include <span>
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

// How one compressed row is stored. The packed formats are the lossless ones of spec §7.2 for
// rows the official numerics have already rounded (a row off its grid is counted, see
// entry_pack_mismatches()).
enum class EntryFormat : uint8_t {
  F32,      // dim floats (exact numerics)
  Fp8Kv,    // e4m3 no-RoPE dims + bf16 RoPE dims + one UE8M0 scale per 64, padded to 8 bytes
  Mxfp4,    // e2m1 pairs (low nibble first) + one UE8M0 scale per 32
  Fp4E4m3,  // e2m1 pairs (low nibble first) + one E4M3 scale per 16 (V4.1 compressed KV)
  Fp8B32,   // e4m3 over every dim + one UE8M0 scale per 32 (V4.1 window KV)
};

// Bytes of one row of `dim` values (rope_dim trailing bf16 dims for Fp8Kv).
int entry_row_bytes(EntryFormat format, int dim, int rope_dim);
// Rows that did not round-trip bit for bit through a packed format since start-up (0 when the
// values came from the official quantizers, which is what the packing relies on).
int64_t entry_pack_mismatches();
// One row in `format` (entry_row_bytes(format, dim, rope_dim) bytes at out), and back.
void entry_pack(EntryFormat format, const float* row, int dim, int rope_dim, uint8_t* out);
void entry_unpack(EntryFormat format, const uint8_t* in, int dim, int rope_dim, float* row);

// The compressed rows of one layer (main entries or index keys). Entry j covers positions
// [r·j, r·j + r). Paged: entry j lives in the engine block that holds its last position,
// table[(r·j + r − 1) / block_size], at slot j mod max(1, block_size / r) of that block's region.
struct EntryStore {
  EntryFormat format = EntryFormat::F32;
  int dim = 0, rope_dim = 0, row_bytes = 0, ratio = 0;
  int64_t count = 0;   // entries emitted so far
  int64_t frozen = 0;  // entries [0, frozen) sit in shared blocks: appends below it only count
  // Paging (pages == nullptr: the rows are in `own`, contiguous).
  uint8_t* pages = nullptr;  // region of this store in block 0
  int64_t page_stride = 0;   // bytes between the regions of consecutive blocks
  int block_size = 0;
  std::span<const int32_t> table;
  std::vector<uint8_t> own;

  bool paged() const { return pages != nullptr; }
  uint8_t* row_ptr(int64_t j);
  const uint8_t* row_ptr(int64_t j) const;
  // Stores `row` (dim floats) as entry `count` and advances count.
  void append(const float* row);
  // Entry j as floats: a pointer into the store for F32, else decoded into `scratch` (dim floats).
  const float* row(int64_t j, float* scratch) const;
  void read(int64_t j, float* out) const;
};

struct BlockState {
  int window = 0;  // sliding_window
  int head_dim = 0;
  std::vector<float> ring;     // [window, head_dim]: row p mod window holds kv(p), positions < next
  CompressorState compressor;  // ratio > 0
  CompressorState index_compressor;  // CSA only
  EntryStore compressed;             // [count, head_dim] (after norm, RoPE at r·j)
  int index_head_dim = 0;
  EntryStore index_keys;  // [count, index_head_dim] (CSA)
};

// One sequence: `position` tokens have been processed; blocks[i] belongs to decoder block i.
struct SequenceState {
  int64_t position = 0;
  std::vector<BlockState> blocks;

  // Points every paged store at the sequence's current block table (it grows between steps).
  void bind_table(std::span<const int32_t> table) {
    for (BlockState& b : blocks) {
      b.compressed.table = table;
      b.index_keys.table = table;
    }
  }
};

}  // namespace deepinfer::model
