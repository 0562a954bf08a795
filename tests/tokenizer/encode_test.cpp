// Encoding vectors of the DeepSeek V4.1 / V4 tokenizers from the encoding spec (§1, §5.3) and
// the tokenize semantics: added tokens recognized by encode(), never by encode_plain().
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_tokenizers.h"

namespace deepinfer::tokenizer {
namespace {

using Ids = std::vector<TokenId>;

Ids encode(const Tokenizer& tok, const std::string& text) {
  auto r = tok.encode(text);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? r.value() : Ids{};
}

Ids plain(const Tokenizer& tok, const std::string& text) {
  auto r = tok.encode_plain(text);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? r.value() : Ids{};
}

TEST(TokenizerEncode, SpecVectorsV41) {
  DEEPINFER_REQUIRE_TOKENIZER(tok, true);
  EXPECT_EQ(encode(*tok, "Hello"), (Ids{19923}));
  EXPECT_EQ(encode(*tok, "Hello, world!"), (Ids{19923, 14, 2058, 3}));
  EXPECT_EQ(encode(*tok, "<｜User｜>Hi<｜Assistant｜>"), (Ids{128803, 23166, 128804}));
  EXPECT_EQ(encode(*tok, "1 12 123 1234"), (Ids{19, 223, 736, 223, 6895, 223, 6895, 22}));
  EXPECT_EQ(encode(*tok, "<｜begin▁of▁sentence｜><｜User｜>What is 2+2?<｜Assistant｜></think>"),
            (Ids{0, 128803, 3085, 344, 223, 20, 13, 20, 33, 128804, 128822}));
  EXPECT_EQ(plain(*tok, "<｜User｜>"), (Ids{30, 28217, 6756, 28217, 32}));
  EXPECT_EQ(encode(*tok, ""), Ids{});
}

TEST(TokenizerEncode, SpecialTokenIdsOfTheSpecTable) {
  DEEPINFER_REQUIRE_TOKENIZER(v41, true);
  DEEPINFER_REQUIRE_TOKENIZER(v4, false);
  const std::vector<std::pair<std::string, TokenId>> shared = {{"<｜begin▁of▁sentence｜>", 0},
                                                               {"<｜end▁of▁sentence｜>", 1},
                                                               {"<｜User｜>", 128803},
                                                               {"<｜Assistant｜>", 128804},
                                                               {"<think>", 128821},
                                                               {"</think>", 128822},
                                                               {"｜DSML｜", 128825},
                                                               {"<｜latest_reminder｜>", 128828},
                                                               {"<｜begin▁sys｜>", 128826},
                                                               {"<｜end▁sys｜>", 128827},
                                                               {"<｜action｜>", 128829},
                                                               {"<｜query｜>", 128830},
                                                               {"<｜authority｜>", 128831},
                                                               {"<｜domain｜>", 128832},
                                                               {"<｜title｜>", 128836},
                                                               {"<｜read_url｜>", 128845}};
  for (const auto& [content, id] : shared) {
    EXPECT_EQ(v41->added_token_id(content), id) << content;
    EXPECT_EQ(v4->added_token_id(content), id) << content;
  }
  EXPECT_EQ(v41->added_token_id("<｜System｜>"), 128799);
  EXPECT_EQ(v41->added_token_id("<｜image｜>"), 129264);
  EXPECT_EQ(v4->added_token_id("<｜System｜>"), -1);
  EXPECT_EQ(v4->added_token_id("<｜image｜>"), 129279);
  EXPECT_EQ(v41->vocab_size(), 129280u);
  EXPECT_EQ(v4->vocab_size(), 129280u);
  // Every id is a token; added tokens never absorb whitespace (spec §5.2 requirement).
  for (TokenId id = 0; id < 129280; ++id) ASSERT_TRUE(v41->has_token(id)) << id;
}

TEST(TokenizerEncode, PlainNeverProducesAddedTokens) {
  DEEPINFER_REQUIRE_TOKENIZER(tok, true);
  for (const AddedToken& t : tok->added_vocabulary().tokens()) {
    const Ids ids = plain(*tok, "x" + t.content + " " + t.content);
    for (TokenId id : ids) ASSERT_FALSE(tok->is_added(id)) << t.content;
    auto text = tok->decode(ids);
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(text.value(), "x" + t.content + " " + t.content);
    // encode() recognizes the same spelling as exactly one id.
    EXPECT_EQ(encode(*tok, t.content), Ids{t.id}) << t.content;
  }
}

TEST(TokenizerEncode, LeftmostLongestAddedTokens) {
  DEEPINFER_REQUIRE_TOKENIZER(tok, true);
  // "<think>" inside "</think>" must not win; adjacent tokens split cleanly.
  EXPECT_EQ(encode(*tok, "</think><think></think>"), (Ids{128822, 128821, 128822}));
  EXPECT_EQ(encode(*tok, "a<｜User｜>"), (Ids{67, 128803}));
}

TEST(TokenizerEncode, InvalidUtf8IsAnError) {
  DEEPINFER_REQUIRE_TOKENIZER(tok, true);
  for (const std::string& bad :
       {std::string("\xff"), std::string("ab\xc3"), std::string("\xed\xa0\x80"),
        std::string("\xc0\xaf"), std::string("\xf4\x90\x80\x80")}) {
    auto r = tok->encode(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("not valid UTF-8"), std::string::npos);
    EXPECT_FALSE(tok->encode_plain(bad).ok());
  }
}

TEST(TokenizerDecode, BytesSpecialsAndErrors) {
  DEEPINFER_REQUIRE_TOKENIZER(tok, true);
  auto t = tok->decode(Ids{128803, 23166, 128804});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t.value(), "<｜User｜>Hi<｜Assistant｜>");
  auto skipped = tok->decode(Ids{0, 23166, 1}, /*skip_special=*/true);
  ASSERT_TRUE(skipped.ok());
  EXPECT_EQ(skipped.value(), "Hi");
  // A lone continuation byte token decodes to U+FFFD, as HF's lossy UTF-8 does.
  const TokenId byte_a9 = tok->token_to_id("©");  // byte 0xA9 in the byte-level alphabet
  ASSERT_GE(byte_a9, 0);
  EXPECT_EQ(tok->decode(Ids{byte_a9}).value(), "\xEF\xBF\xBD");
  EXPECT_FALSE(tok->decode(Ids{129280}).ok());
  EXPECT_FALSE(tok->decode(Ids{-1}).ok());
}

TEST(TokenizerEncode, LongRunsUseTheHeapMergeAndMatchShortRuns) {
  DEEPINFER_REQUIRE_TOKENIZER(tok, true);
  // The same word encoded as one long piece must equal the reference result computed piecewise
  // where both algorithms apply: a repeated pattern splits into repeated ids.
  const Ids one = encode(*tok, std::string(16, ' ') + "x");
  const Ids many = encode(*tok, std::string(4000, ' ') + "x");
  ASSERT_FALSE(one.empty());
  auto text = tok->decode(many);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text.value(), std::string(4000, ' ') + "x");
  EXPECT_LT(many.size(), 4000u / 8);
}

}  // namespace
}  // namespace deepinfer::tokenizer

namespace deepinfer::tokenizer {
namespace {

TEST(TokenizerEncode, HugeRunsDoNotHitRegexLimits) {
  DEEPINFER_REQUIRE_TOKENIZER(tok, true);
  for (const std::string& text : {std::string(200000, ' ') + "b", std::string(100000, '\n') + " x",
                                  std::string(150000, 'a') + std::string(50000, '.') + "\n",
                                  std::string(100000, ' ') + "\n" + std::string(100000, '\t')}) {
    auto ids = tok->encode(text);
    ASSERT_TRUE(ids.ok()) << ids.error().message;
    EXPECT_EQ(tok->decode(ids.value()).value(), text);
  }
}

}  // namespace
}  // namespace deepinfer::tokenizer
