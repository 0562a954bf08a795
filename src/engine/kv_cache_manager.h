// KvCacheManager: gives requests KV blocks and state slots, finds their cached prefixes and
// publishes their full computed blocks. Shared prefix blocks are immutable (full and computed);
// a request only ever writes its own tail blocks, so sharing never needs a copy. All-or-nothing
// allocation: a failed call changes nothing, the scheduler then preempts.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/block_pool.h"
#include "engine/request.h"

namespace deepinfer::engine {

struct KvCacheConfig {
  int32_t num_blocks = 1024;
  int32_t block_size = 16;
  int32_t num_state_slots = 256;  // at most this many requests hold KV at once
  bool prefix_caching = true;
};

class KvCacheManager {
 public:
  explicit KvCacheManager(const KvCacheConfig& config);

  const KvCacheConfig& config() const { return config_; }
  const BlockPool& pool() const { return pool_; }
  int32_t num_free_slots() const { return static_cast<int32_t>(free_slots_.size()); }

  // Cached leading blocks of `req` (never all of its tokens: the last one is always computed).
  // Fills req.kv.block_hashes for the full blocks; returns the hit blocks in `hit`.
  void find_cached_prefix(Request& req, std::vector<int32_t>& hit);

  // First admission: takes the hit blocks and a state slot, and new blocks so that positions
  // [0, num_tokens) are covered. False (and no change) when memory is short.
  bool admit(Request& req, std::span<const int32_t> hit, int32_t num_tokens);
  // Grows a running request's table to cover [0, num_tokens). False (no change) when short.
  bool grow(Request& req, int32_t num_tokens);
  // Publishes the request's full blocks below min(num_confirmed, known tokens).
  void cache_computed_blocks(Request& req);
  // Returns every block (tail first, so the tail is evicted first) and the state slot.
  void free(Request& req);

  // Blocks that reaching num_tokens would need beyond the request's table.
  int32_t blocks_needed(const Request& req, int32_t num_tokens) const;

 private:
  KvCacheConfig config_;
  BlockPool pool_;
  std::vector<int32_t> free_slots_;
};

}  // namespace deepinfer::engine
