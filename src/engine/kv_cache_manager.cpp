// KvCacheManager: block accounting over BlockPool, prefix lookup along the hash chain.
#include "engine/kv_cache_manager.h"

#include <algorithm>

namespace deepinfer::engine {

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : config_(config), pool_(config.num_blocks, config.block_size) {
  free_slots_.reserve(config.num_state_slots);
  for (int32_t s = config.num_state_slots - 1; s >= 0; --s) free_slots_.push_back(s);
}

int32_t KvCacheManager::blocks_needed(const Request& req, int32_t num_tokens) const {
  const int32_t have = static_cast<int32_t>(req.kv.block_table.size());
  const int32_t want = (num_tokens + config_.block_size - 1) / config_.block_size;
  return std::max(0, want - have);
}

void KvCacheManager::find_cached_prefix(Request& req, std::vector<int32_t>& hit) {
  hit.clear();
  const int32_t bs = config_.block_size;
  const int32_t full = static_cast<int32_t>(req.tokens.size()) / bs;
  std::vector<uint64_t>& hashes = req.kv.block_hashes;
  uint64_t parent = hashes.empty() ? 0 : hashes.back();
  for (auto b = static_cast<int32_t>(hashes.size()); b < full; ++b) {
    parent = prefix_block_hash(parent, std::span(req.tokens).subspan(b * bs, bs));
    hashes.push_back(parent);
  }
  if (!config_.prefix_caching) return;
  const int32_t usable = (static_cast<int32_t>(req.tokens.size()) - 1) / bs;
  for (int32_t b = 0; b < usable; ++b) {
    const int32_t block = pool_.lookup(hashes[b], std::span(req.tokens).subspan(b * bs, bs));
    if (block < 0) break;
    hit.push_back(block);
  }
}

bool KvCacheManager::admit(Request& req, std::span<const int32_t> hit, int32_t num_tokens) {
  if (free_slots_.empty()) return false;
  int32_t reclaimed = 0;  // hit blocks now on the free list: taking them shrinks it
  for (int32_t b : hit) reclaimed += pool_.ref_count(b) == 0;
  const int32_t bs = config_.block_size;
  const int32_t fresh =
      std::max<int32_t>(0, (num_tokens + bs - 1) / bs - static_cast<int32_t>(hit.size()));
  if (fresh + reclaimed > pool_.num_free()) return false;
  req.kv.block_table.clear();
  for (int32_t b : hit) {
    pool_.acquire(b);
    req.kv.block_table.push_back(b);
  }
  for (int32_t i = 0; i < fresh; ++i) req.kv.block_table.push_back(pool_.allocate());
  req.kv.num_cached_blocks = static_cast<int32_t>(hit.size());
  req.kv.state_slot = free_slots_.back();
  free_slots_.pop_back();
  return true;
}

bool KvCacheManager::grow(Request& req, int32_t num_tokens) {
  const int32_t need = blocks_needed(req, num_tokens);
  if (need > pool_.num_free()) return false;
  for (int32_t i = 0; i < need; ++i) req.kv.block_table.push_back(pool_.allocate());
  return true;
}

void KvCacheManager::cache_computed_blocks(Request& req) {
  if (!config_.prefix_caching) return;
  const int32_t bs = config_.block_size;
  const int32_t known =
      std::min<int32_t>(req.num_confirmed, static_cast<int32_t>(req.tokens.size()));
  const int32_t full =
      std::min<int32_t>(known / bs, static_cast<int32_t>(req.kv.block_table.size()));
  std::vector<uint64_t>& hashes = req.kv.block_hashes;
  for (int32_t b = req.kv.num_cached_blocks; b < full; ++b) {
    const auto tokens = std::span(req.tokens).subspan(b * bs, bs);
    if (static_cast<int32_t>(hashes.size()) == b)
      hashes.push_back(prefix_block_hash(b == 0 ? 0 : hashes[b - 1], tokens));
    pool_.cache(req.kv.block_table[b], hashes[b], tokens);
  }
  req.kv.num_cached_blocks = std::max(req.kv.num_cached_blocks, full);
}

void KvCacheManager::free(Request& req) {
  std::vector<int32_t>& table = req.kv.block_table;
  for (auto it = table.rbegin(); it != table.rend(); ++it) pool_.release(*it);
  table.clear();
  req.kv.num_cached_blocks = 0;
  if (req.kv.state_slot >= 0) free_slots_.push_back(req.kv.state_slot);
  req.kv.state_slot = -1;
}

}  // namespace deepinfer::engine
