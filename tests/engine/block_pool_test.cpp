// BlockPool and KvCacheManager: LRU free list, prefix-cache hits and evictions, collision
// safety, all-or-nothing admission, and the "last token is always computed" rule.
#include "engine/block_pool.h"

#include <gtest/gtest.h>

#include <vector>

#include "engine/kv_cache_manager.h"

namespace deepinfer::engine {
namespace {

TEST(BlockPool, AllocatesLeastRecentlyFreedFirst) {
  BlockPool pool(3, 2);
  const int32_t a = pool.allocate(), b = pool.allocate(), c = pool.allocate();
  EXPECT_EQ(pool.allocate(), -1);
  EXPECT_EQ(pool.num_free(), 0);
  pool.release(b);
  pool.release(a);
  pool.release(c);
  EXPECT_EQ(pool.allocate(), b);
  EXPECT_EQ(pool.allocate(), a);
  EXPECT_EQ(pool.allocate(), c);
}

TEST(BlockPool, CachedBlocksSurviveReleaseUntilEvicted) {
  BlockPool pool(2, 2);
  const std::vector<int32_t> tokens = {7, 8};
  const uint64_t h = prefix_block_hash(0, tokens);
  const int32_t a = pool.allocate();
  pool.cache(a, h, tokens);
  pool.release(a);
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_EQ(pool.lookup(h, tokens), a);
  pool.acquire(a);  // a prefix hit takes it off the free list
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.ref_count(a), 1);
  pool.release(a);
  const int32_t other = pool.allocate();  // the never-used block is older on the list
  EXPECT_NE(other, a);
  EXPECT_EQ(pool.lookup(h, tokens), a);
  EXPECT_EQ(pool.allocate(), a);  // now evicted
  EXPECT_EQ(pool.lookup(h, tokens), -1);
}

TEST(BlockPool, LookupChecksTheTokensNotOnlyTheHash) {
  BlockPool pool(1, 2);
  const std::vector<int32_t> tokens = {1, 2}, other = {1, 3};
  const uint64_t h = prefix_block_hash(0, tokens);
  pool.cache(pool.allocate(), h, tokens);
  EXPECT_EQ(pool.lookup(h, other), -1);
}

TEST(BlockPool, HashChainsThroughTheParent) {
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  EXPECT_EQ(prefix_block_hash(5, tokens), prefix_block_hash(5, tokens));
  EXPECT_NE(prefix_block_hash(5, tokens), prefix_block_hash(6, tokens));
}

Request make_request(std::vector<int32_t> tokens) {
  Request r;
  r.tokens = std::move(tokens);
  r.num_prompt = static_cast<int32_t>(r.tokens.size());
  return r;
}

TEST(KvCacheManager, PrefixHitNeverCoversTheLastToken) {
  KvCacheManager kv(
      {.num_blocks = 8, .block_size = 2, .num_state_slots = 2, .prefix_caching = true});
  Request first = make_request({1, 2, 3, 4});
  std::vector<int32_t> hit;
  kv.find_cached_prefix(first, hit);
  EXPECT_TRUE(hit.empty());
  ASSERT_TRUE(kv.admit(first, hit, 4));
  first.num_confirmed = 4;
  kv.cache_computed_blocks(first);
  kv.free(first);
  Request same = make_request({1, 2, 3, 4});
  kv.find_cached_prefix(same, hit);
  EXPECT_EQ(hit.size(), 1u);  // 4 tokens: block 2 would leave nothing to compute
  Request longer = make_request({1, 2, 3, 4, 5});
  kv.find_cached_prefix(longer, hit);
  EXPECT_EQ(hit.size(), 2u);
  Request diverging = make_request({1, 2, 9, 4, 5});
  kv.find_cached_prefix(diverging, hit);
  EXPECT_EQ(hit.size(), 1u);
}

TEST(KvCacheManager, AdmissionIsAllOrNothing) {
  KvCacheManager kv(
      {.num_blocks = 3, .block_size = 2, .num_state_slots = 4, .prefix_caching = true});
  Request a = make_request({1, 2, 3});
  std::vector<int32_t> none;
  ASSERT_TRUE(kv.admit(a, none, 3));  // 2 blocks
  Request b = make_request({4, 5, 6});
  EXPECT_FALSE(kv.admit(b, none, 3));
  EXPECT_TRUE(b.kv.block_table.empty());
  EXPECT_EQ(b.kv.state_slot, -1);
  EXPECT_EQ(kv.pool().num_free(), 1);
  EXPECT_FALSE(kv.grow(a, 7));  // needs 2 more
  EXPECT_EQ(a.kv.block_table.size(), 2u);
  EXPECT_TRUE(kv.grow(a, 6));
  kv.free(a);
  EXPECT_EQ(kv.pool().num_free(), 3);
  EXPECT_EQ(kv.num_free_slots(), 4);
}

TEST(KvCacheManager, CachingOffFindsNothing) {
  KvCacheManager kv(
      {.num_blocks = 4, .block_size = 2, .num_state_slots = 2, .prefix_caching = false});
  Request a = make_request({1, 2, 3});
  std::vector<int32_t> hit;
  kv.find_cached_prefix(a, hit);
  ASSERT_TRUE(kv.admit(a, hit, 3));
  a.num_confirmed = 3;
  kv.cache_computed_blocks(a);
  kv.free(a);
  Request b = make_request({1, 2, 3});
  kv.find_cached_prefix(b, hit);
  EXPECT_TRUE(hit.empty());
  EXPECT_EQ(kv.pool().num_cached(), 0);
}

}  // namespace
}  // namespace deepinfer::engine
