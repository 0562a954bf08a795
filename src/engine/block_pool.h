// BlockPool: the fixed set of KV blocks, their reference counts, the prefix-cache map
// (hash → block, with the block's token ids kept to rule out collisions) and an LRU free list.
// A block with ref_count 0 stays cached until allocate() evicts it, least recently freed first.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace deepinfer::engine {

// XXH3-64 over the block's token ids, seeded with the parent block's hash (the root uses 0).
uint64_t prefix_block_hash(uint64_t parent_hash, std::span<const int32_t> tokens);

class BlockPool {
 public:
  BlockPool(int32_t num_blocks, int32_t block_size);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  int32_t num_free() const { return num_free_; }  // ref_count 0, cached or empty
  int32_t num_used() const { return num_blocks() - num_free_; }
  int32_t num_cached() const { return static_cast<int32_t>(cached_.size()); }
  int32_t ref_count(int32_t block) const { return blocks_[block].ref_count; }

  // A free block for new content (ref_count becomes 1); evicts its cache entry. -1 when none.
  int32_t allocate();
  // The cached block holding exactly `tokens` under `hash`, or -1. Does not take a reference.
  int32_t lookup(uint64_t hash, std::span<const int32_t> tokens) const;
  // Takes one more reference (a cached free block leaves the free list).
  void acquire(int32_t block);
  // Drops one reference; at zero the block joins the free list's most-recent end.
  void release(int32_t block);
  // Publishes a full, computed block under `hash` (no-op when the hash is already cached).
  void cache(int32_t block, uint64_t hash, std::span<const int32_t> tokens);
  // Forgets every cached hash (blocks in use stay valid); used by tests and on model change.
  void reset_cache();

 private:
  struct Block {
    int32_t ref_count = 0;
    bool cached = false;
    uint64_t hash = 0;
    int32_t prev = -1, next = -1;  // free-list links
  };
  void unlink(int32_t block);
  void push_back(int32_t block);

  int32_t block_size_;
  std::vector<Block> blocks_;
  std::vector<int32_t> tokens_;  // block_size ids per block, valid while cached
  std::unordered_map<uint64_t, int32_t> cached_;
  int32_t head_ = -1, tail_ = -1, num_free_ = 0;
};

}  // namespace deepinfer::engine
