// Streaming detokenizer: only complete UTF-8 is emitted, multi-byte characters split over byte
// tokens are held, and the stream concatenates to decode() of the whole sequence.
#include "tokenizer/incremental_decoder.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "test_tokenizers.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace deepinfer::tokenizer {
namespace {

using Ids = std::vector<TokenId>;

TEST(IncrementalDecoder, HoldsSplitCharacters) {
  DEEPINFER_REQUIRE_TOKENIZER(tok, true);
  // "毕" is E6 AF 95: feed it as three single-byte tokens.
  IncrementalDecoder dec(*tok);
  std::string out;
  const Ids ids = {tok->token_to_id("æ"), tok->token_to_id("¯"), tok->token_to_id("ķ")};
  for (TokenId id : ids) ASSERT_GE(id, 0);
  ASSERT_TRUE(dec.push(ids[0], out).ok());
  EXPECT_EQ(out, "");
  EXPECT_EQ(dec.pending(), 1u);
  ASSERT_TRUE(dec.push(ids[1], out).ok());
  EXPECT_EQ(out, "");
  ASSERT_TRUE(dec.push(ids[2], out).ok());
  EXPECT_EQ(out, "毕");
  EXPECT_EQ(dec.pending(), 0u);
}

TEST(IncrementalDecoder, SpecialTokensAndErrors) {
  DEEPINFER_REQUIRE_TOKENIZER(tok, true);
  IncrementalDecoder dec(*tok);
  std::string out;
  ASSERT_TRUE(dec.push(tok->token_to_id("æ"), out).ok());
  ASSERT_TRUE(dec.push(128822, out).ok());  // </think> after a dangling lead byte
  EXPECT_EQ(out, "\xEF\xBF\xBD</think>");
  EXPECT_FALSE(dec.push(129280, out).ok());
  IncrementalDecoder skip(*tok, /*skip_special=*/true);
  std::string s;
  ASSERT_TRUE(skip.push(0, s).ok());
  ASSERT_TRUE(skip.push(19923, s).ok());
  EXPECT_EQ(s, "Hello");
}

TEST(IncrementalDecoder, StreamEqualsDecodeOnRandomIds) {
  DEEPINFER_REQUIRE_TOKENIZER(tok, true);
  std::mt19937 rng(3);
  // Mostly single-byte tokens (ids of the 256 byte-level characters) to split characters often.
  Ids byte_ids;
  for (int b = 0; b < 256; ++b) {
    const TokenId id = tok->token_to_id(byte_to_text(static_cast<uint8_t>(b)));
    ASSERT_GE(id, 0) << b;
    byte_ids.push_back(id);
  }
  std::uniform_int_distribution<TokenId> any(0, 129279);
  std::uniform_int_distribution<size_t> pick(0, byte_ids.size() - 1);
  for (int iter = 0; iter < 500; ++iter) {
    Ids ids;
    const int n = 1 + iter % 40;
    for (int i = 0; i < n; ++i) ids.push_back(rng() % 3 == 0 ? any(rng) : byte_ids[pick(rng)]);
    IncrementalDecoder dec(*tok);
    std::string stream;
    for (TokenId id : ids) {
      std::string piece;
      ASSERT_TRUE(dec.push(id, piece).ok());
      ASSERT_TRUE(is_valid_utf8(piece));
      stream += piece;
    }
    dec.finish(stream);
    EXPECT_EQ(stream, tok->decode(ids).value());
  }
}

TEST(IncrementalDecoder, StreamsEncodedTextBack) {
  DEEPINFER_REQUIRE_TOKENIZER(tok, true);
  const std::string text =
      "Streaming 毕老师 👨‍👩‍👧‍👦 ĠÑĤ <｜User｜> done\n";
  const Ids ids = tok->encode(text).value();
  IncrementalDecoder dec(*tok);
  std::string out;
  for (TokenId id : ids) ASSERT_TRUE(dec.push(id, out).ok());
  dec.finish(out);
  EXPECT_EQ(out, text);
}

}  // namespace
}  // namespace deepinfer::tokenizer
