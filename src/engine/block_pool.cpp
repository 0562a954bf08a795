// BlockPool: intrusive doubly linked free list, so taking a cached block back is O(1).
#include "engine/block_pool.h"

#include <xxhash.h>

#include <algorithm>

namespace deepinfer::engine {

uint64_t prefix_block_hash(uint64_t parent_hash, std::span<const int32_t> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent_hash);
}

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size),
      blocks_(num_blocks),
      tokens_(static_cast<size_t>(num_blocks) * block_size) {
  cached_.reserve(num_blocks);
  for (int32_t b = 0; b < num_blocks; ++b) push_back(b);
}

void BlockPool::unlink(int32_t b) {
  Block& block = blocks_[b];
  (block.prev >= 0 ? blocks_[block.prev].next : head_) = block.next;
  (block.next >= 0 ? blocks_[block.next].prev : tail_) = block.prev;
  block.prev = block.next = -1;
  --num_free_;
}

void BlockPool::push_back(int32_t b) {
  Block& block = blocks_[b];
  block.prev = tail_;
  block.next = -1;
  (tail_ >= 0 ? blocks_[tail_].next : head_) = b;
  tail_ = b;
  ++num_free_;
}

int32_t BlockPool::allocate() {
  if (head_ < 0) return -1;
  const int32_t b = head_;
  unlink(b);
  Block& block = blocks_[b];
  if (block.cached) {
    cached_.erase(block.hash);
    block.cached = false;
  }
  block.ref_count = 1;
  return b;
}

int32_t BlockPool::lookup(uint64_t hash, std::span<const int32_t> tokens) const {
  const auto it = cached_.find(hash);
  if (it == cached_.end()) return -1;
  const int32_t* stored = tokens_.data() + static_cast<size_t>(it->second) * block_size_;
  if (!std::equal(tokens.begin(), tokens.end(), stored)) return -1;
  return it->second;
}

void BlockPool::acquire(int32_t b) {
  if (blocks_[b].ref_count++ == 0) unlink(b);
}

void BlockPool::release(int32_t b) {
  if (--blocks_[b].ref_count == 0) push_back(b);
}

void BlockPool::cache(int32_t b, uint64_t hash, std::span<const int32_t> tokens) {
  Block& block = blocks_[b];
  if (block.cached || !cached_.emplace(hash, b).second) return;
  block.cached = true;
  block.hash = hash;
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<size_t>(b) * block_size_);
}

void BlockPool::reset_cache() {
  for (Block& block : blocks_) block.cached = false;
  cached_.clear();
}

}  // namespace deepinfer::engine
