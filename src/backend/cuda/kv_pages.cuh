// Where a sequence's compressed entries (CSA / HCA entries, index keys) live on the device. The
// entry stores are paged by the engine's KV blocks: a block of block_size positions holds, per
// store, per_block = max(1, block_size / ratio) rows, those of the entries whose last position
// falls in it (the CPU runner's layout, engine/v4_model_runner.h); block_size must divide every
// ratio or be a multiple of it. Each state slot's block table is a row of a fixed device buffer,
// uploaded with the step's metadata, so decode graphs replay over the new tables. Every kernel
// that reads or writes entries maps (slot, entry index) to a store row through entry_row().
#pragma once

#include <cstdint>

#include "backend/cuda/exec.cuh"

namespace deepinfer::cuda {

struct EntryPages {
  const int32_t* tables = nullptr;  // [slots, max_blocks] block ids; null: the dense layout
  int64_t dense_rows = 0;           // dense layout: slot s's entry j at row s · dense_rows + j
  int32_t max_blocks = 0;           // table row stride
  int32_t block_size = 1;           // positions per block
  int32_t ratio = 1;                // positions per entry
  int32_t per_block = 1;            // store rows per block
};

// One slot after another, dense_rows rows each (kernel checks, stores that are not paged).
inline EntryPages dense_pages(int64_t rows_per_slot) {
  EntryPages p;
  p.dense_rows = rows_per_slot;
  return p;
}

// Store rows per block of block_size positions for entries of `ratio` positions.
DI_HD inline int32_t entry_rows_per_block(int32_t block_size, int32_t ratio) {
  return block_size / ratio > 1 ? block_size / ratio : 1;
}

// The store row of entry j (positions [j · ratio, (j + 1) · ratio)) of state slot `slot`.
DI_HD inline int64_t entry_row(const EntryPages& p, int64_t slot, int64_t j) {
  if (!p.tables) return slot * p.dense_rows + j;
  const int64_t block = ((j + 1) * p.ratio - 1) / p.block_size;
  return int64_t{p.tables[slot * p.max_blocks + block]} * p.per_block + j % p.per_block;
}

}  // namespace deepinfer::cuda
