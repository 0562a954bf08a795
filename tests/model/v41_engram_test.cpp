// Engram pieces of DeepSeek V4.1 (spec §12.2 item 9, §12.3): numpy's PCG64 stream and bounded
// integers (values printed by numpy 1.24's default_rng), the hash multipliers, the prime layout,
// the n-gram rows, the token map, and the gate against the official fixture.
#include "model/v41_engram.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backend/cpu/quant_act.h"
#include "model/pcg64.h"

namespace deepinfer::model {
namespace {

using u128 = unsigned __int128;

u128 make_u128(uint64_t hi, uint64_t lo) { return (static_cast<u128>(hi) << 64) | lo; }

TEST(Pcg64, SeedSequenceStateMatchesNumpy) {
  // numpy.random.SeedSequence(0).generate_state(4)
  EXPECT_EQ(seed_sequence_state(0, 4),
            (std::vector<uint32_t>{0xb0f478be, 0xdb2cd7e7, 0x2c71ba49, 0xabf4641a}));
  // An entropy of two words: SeedSequence(2**40 + 5).generate_state(8)
  EXPECT_EQ(seed_sequence_state((1ull << 40) + 5, 8),
            (std::vector<uint32_t>{0xe08a170b, 0xdae41755, 0x7ecdcb2c, 0x8415abe8, 0x4b9118d0,
                                   0x2525c5b4, 0x3392bed3, 0x42c2793f}));
}

TEST(Pcg64, SeededStateAndRawOutputsMatchNumpy) {
  Pcg64 g(0);  // default_rng(0).bit_generator.state
  EXPECT_TRUE(g.state() == make_u128(0x1aa1b5345996452dull, 0x09585eb7a69561e3ull));
  EXPECT_TRUE(g.increment() == make_u128(0x418ddadb3af71a82ull, 0x588133bc447873a9ull));
  EXPECT_EQ(g.next64(), 0xa30febcfd9c2825full);  // random_raw(3)
  EXPECT_EQ(g.next64(), 0x4510bdf882d9d721ull);
  EXPECT_EQ(g.next64(), 0x0a7d3da94ecde8b8ull);
  Pcg64 h((1ull << 40) + 5);
  EXPECT_EQ(h.next64(), 0x01369aef039fedebull);
  EXPECT_EQ(h.next64(), 0x5f61b40473314316ull);
}

std::vector<int64_t> draw(Pcg64& g, int64_t low, int64_t high, int n) {
  std::vector<int64_t> v;
  for (int i = 0; i < n; ++i) v.push_back(g.integer(low, high));
  return v;
}

TEST(Pcg64, BoundedIntegersMatchNumpy) {
  Pcg64 a(0);  // default_rng(0).integers(0, 1000, size=8): the 32-bit Lemire path
  EXPECT_EQ(draw(a, 0, 1000, 8), (std::vector<int64_t>{850, 636, 511, 269, 307, 40, 75, 16}));
  Pcg64 b(5);  // integers(0, 2**40 + 3, size=8): the 64-bit path
  EXPECT_EQ(draw(b, 0, (1ll << 40) + 3, 8),
            (std::vector<int64_t>{885110075054, 888340292872, 566606446457, 314241940642,
                                  59297434362, 421518542152, 449121038995, 49780602145}));
  Pcg64 c(5);
  EXPECT_EQ(draw(c, 0, 7, 8), (std::vector<int64_t>{4, 5, 0, 5, 3, 3, 4, 2}));
  // One generator across calls: the buffered 32-bit half carries over.
  Pcg64 d(7);
  EXPECT_EQ(draw(d, -5, 3, 6), (std::vector<int64_t>{2, 0, 0, 2, -1, 1}));
  EXPECT_EQ(draw(d, 0, 1ll << 32, 3), (std::vector<int64_t>{3580503874, 967257515, 238506309}));
  EXPECT_EQ(draw(d, 0, (1ll << 32) + 1, 2), (std::vector<int64_t>{3751883480, 22614310}));
}

TEST(EngramHash, MultipliersMatchNumpy) {
  // 2 * default_rng(10007 * layer).integers(0, bound, 4, int64) + 1, bound from the release's
  // compressed vocab of 99092 ids.
  EXPECT_EQ(v41::engram_hash_multipliers(1, 4, 99092),
            (std::vector<int64_t>{76632096046245, 4839876093313, 35959672319349, 73987337458391}));
  EXPECT_EQ(v41::engram_hash_multipliers(14, 4, 99092),
            (std::vector<int64_t>{67716810739261, 51510806800915, 30921347202721, 82619226485591}));
  EXPECT_EQ(
      v41::engram_hash_multipliers(0, 4, 600),
      (std::vector<int64_t>{9791557692314227, 4147238719407709, 629856758207497, 254067552281937}));
}

}  // namespace
}  // namespace deepinfer::model
