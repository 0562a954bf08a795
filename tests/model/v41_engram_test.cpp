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
#include "fixture_util.h"
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

TEST(EngramLayout, ReleasePrimesSumToTheReleaseTableSizes) {
  // The V4.1-Flash config (spec §12.1): Engram at 1 and 14, n-grams 2..4 × 8 heads, buckets from
  // 16M; engram_num_embeddings = [384006168, 384016682] is the sum of each layer's 24 primes.
  v41::EngramConfig c;
  c.layer_ids = {1, 14};
  c.max_ngram_size = 4;
  c.bucket_start = 16000000;
  c.n_heads = 8;
  c.head_dim = 256;
  c.compressed_vocab_size = 99092;
  c.num_embeddings = {384006168, 384016682};
  v41::EngramTokenMap map;
  map.ids.resize(99092);
  for (size_t i = 0; i < map.ids.size(); ++i) map.ids[i] = static_cast<int32_t>(i);
  map.n_compressed = 99092;
  auto layout = v41::make_engram_layout(c, map);
  ASSERT_TRUE(layout.ok()) << layout.error().message;
  EXPECT_EQ(layout->num_rows, (std::vector<int64_t>{384006168, 384016682}));
  EXPECT_EQ(layout->primes[0][0], 16000057);  // the smallest prime above 16M - 1
  EXPECT_EQ(layout->n_cols(), 24);
  EXPECT_EQ(layout->offsets[1][1], layout->primes[1][0]);
  // A table that is too small is an error, not an out-of-range read later.
  c.num_embeddings = {384006167, 384016682};
  EXPECT_FALSE(v41::make_engram_layout(c, map).ok());
}

TEST(EngramTokenMap, NormalizerFoldsCaseAccentsWidthAndSpaces) {
  EXPECT_EQ(v41::engram_normalize(" The"), "the");
  EXPECT_EQ(v41::engram_normalize("THE"), "the");
  EXPECT_EQ(v41::engram_normalize("Ärger"), "arger");
  EXPECT_EQ(v41::engram_normalize(" crème"), "creme");
  EXPECT_EQ(v41::engram_normalize("\uFB02ow"), "flow");  // ligature ﬂ
  EXPECT_EQ(v41::engram_normalize("\uFF3A"), "z");       // full-width Ｚ
  EXPECT_EQ(v41::engram_normalize("\u2163"), "iv");      // Roman numeral Ⅳ
  EXPECT_EQ(v41::engram_normalize("u\u0308"), "u");      // combining diaeresis
  EXPECT_EQ(v41::engram_normalize("\u0308"), "");        // a lone mark: nothing left
  EXPECT_EQ(v41::engram_normalize("\u03A3"), "\u03C3");  // Σ → σ, no final-sigma context
  EXPECT_EQ(v41::engram_normalize("   "), " ");          // a lone space survives
  EXPECT_EQ(v41::engram_normalize("\n\n\t"), " ");
  EXPECT_EQ(v41::engram_normalize("\u2009"), " ");  // thin space: NFKC → space
  EXPECT_EQ(v41::engram_normalize(" a \n b "), "a b");
}

TEST(EngramTokenMap, ByteLevelTokensCollapseByNormalizedText) {
  // Byte-level vocabulary: Ġ = space, Ċ = newline, Ã = byte 0xC3 alone (invalid UTF-8), Ã¤ = ä.
  const std::string json = R"({"added_tokens": [{"id": 9, "content": "<｜begin▁of▁sentence｜>",
      "special": true}], "model": {"type": "BPE", "vocab": {"Ġthe": 0, "the": 1, "THE": 2,
      "Ã": 3, "Ã¤": 4, "a": 5, "Ġ": 6, "ĠĠ": 7, "Ċ": 8, "<｜begin▁of▁sentence｜>": 9}}})";
  auto map = v41::build_engram_token_map(json, 0);
  ASSERT_TRUE(map.ok()) << map.error().message;
  EXPECT_EQ(map->ids, (std::vector<int32_t>{0, 0, 0, 1, 2, 2, 3, 3, 3, 4}));
  EXPECT_EQ(map->n_compressed, 5);
  EXPECT_FALSE(v41::build_engram_token_map("{\"model\": {}}", 0).ok());
  EXPECT_FALSE(v41::build_engram_token_map("not json", 0).ok());
}

TEST(EngramHash, RowsBlockAtSequenceStartAndImageTokens) {
  v41::EngramConfig c;
  c.layer_ids = {0, 3};
  c.max_ngram_size = 3;
  c.bucket_start = 11;
  c.n_heads = 2;
  c.head_dim = 32;
  v41::EngramTokenMap map;
  map.ids = {0, 1, 2, 3, 3, 4};  // ids 3 and 4 normalize alike
  map.n_compressed = 5;
  c.pad_token_id = 2;
  auto layout = v41::make_engram_layout(c, map);
  ASSERT_TRUE(layout.ok()) << layout.error().message;
  const auto& L = layout.value();
  // Primes above 10, in order (layer, n-gram, head), never reused: 11 13 | 17 19 ; 23 29 | 31 37.
  EXPECT_EQ(L.primes[0], (std::vector<int64_t>{11, 13, 17, 19}));
  EXPECT_EQ(L.primes[1], (std::vector<int64_t>{23, 29, 31, 37}));
  EXPECT_EQ(L.offsets[1], (std::vector<int64_t>{0, 23, 52, 83}));
  auto expect = [&](int l, int64_t t0, int64_t t1, int64_t t2, const int64_t* row) {
    const auto& m = L.multipliers[static_cast<size_t>(l)];
    const int64_t h2 = (t0 * m[0]) ^ (t1 * m[1]), h3 = h2 ^ (t2 * m[2]);
    const auto& p = L.primes[static_cast<size_t>(l)];
    const auto& o = L.offsets[static_cast<size_t>(l)];
    EXPECT_EQ(row[0], h2 % p[0] + o[0]);
    EXPECT_EQ(row[1], h2 % p[1] + o[1]);
    EXPECT_EQ(row[2], h3 % p[2] + o[2]);
    EXPECT_EQ(row[3], h3 % p[3] + o[3]);
  };
  const int32_t ids[] = {5, 3, 1, 4, 0};
  const uint8_t text[] = {1, 1, 1, 0, 1};  // id 4 at t = 3 is an image token
  auto hist = v41::engram_fresh_history(L);
  std::vector<int64_t> rows(5 * 2 * 4);
  ASSERT_TRUE(v41::engram_hash_rows(L, ids, 5, text, hist, rows.data()).ok());
  const int64_t pad = 2;  // compressed id of token 2
  for (int l = 0; l < 2; ++l) {
    expect(l, 4, pad, pad, rows.data() + (0 * 2 + l) * 4);  // start: no history
    expect(l, 3, 4, pad, rows.data() + (1 * 2 + l) * 4);
    expect(l, 1, 3, 4, rows.data() + (2 * 2 + l) * 4);
    expect(l, pad, pad, pad, rows.data() + (3 * 2 + l) * 4);  // the image token itself
    expect(l, 0, pad, pad, rows.data() + (4 * 2 + l) * 4);    // look-back stops at it
  }
  // The same tokens in two chunks give the same rows (the history carries over).
  auto h2 = v41::engram_fresh_history(L);
  std::vector<int64_t> split(rows.size());
  ASSERT_TRUE(v41::engram_hash_rows(L, ids, 2, text, h2, split.data()).ok());
  ASSERT_TRUE(v41::engram_hash_rows(L, ids + 2, 3, text + 2, h2, split.data() + 16).ok());
  EXPECT_EQ(split, rows);
  // A history rebuilt from the raw ids so far continues the same way.
  auto h3 = v41::engram_history_of(L, ids, 2);
  std::vector<int64_t> tail(24);
  ASSERT_TRUE(v41::engram_hash_rows(L, ids + 2, 3, text + 2, h3, tail.data()).ok());
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), rows.begin() + 16));
  const int32_t bad[] = {6};
  EXPECT_FALSE(v41::engram_hash_rows(L, bad, 1, nullptr, h2, split.data()).ok());
}

TEST(EngramFixture, TokenMapAndLayoutMatchTheOfficialCode) {
  const std::string dir = testing::fixture_dir("official_v41_c_bf16");
  auto ref = testing::Reference::open(dir);
  ASSERT_TRUE(ref.ok());
  auto cfg = v41::load_v41_config(dir);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  const v41::EngramConfig ec = v41::engram_config(cfg.value());
  auto map = v41::load_engram_token_map(dir + "/tokenizer.json", 0);
  ASSERT_TRUE(map.ok()) << map.error().message;
  EXPECT_EQ(map->ids, ref.i32("engram_token_map"));
  EXPECT_EQ(map->n_compressed, ec.compressed_vocab_size);
  // engram_num_embeddings in the fixture's config is the official layout's sum of primes.
  auto layout = v41::make_engram_layout(ec, map.value());
  ASSERT_TRUE(layout.ok()) << layout.error().message;
  EXPECT_EQ(layout->num_rows, ec.num_embeddings);
}

}  // namespace
}  // namespace deepinfer::model
