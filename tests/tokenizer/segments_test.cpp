// Segment encoding of rendered prompts (encoding spec §5): only the spans the renderer marks
// special become special ids; request text that spells a special token stays plain BPE.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_tokenizers.h"

namespace deepinfer::tokenizer {
namespace {

using Ids = std::vector<TokenId>;

// The V4.1 non-thinking prompt for one user message, with its four template special spans.
struct Prompt {
  std::string text;
  std::vector<TextSpan> spans;
  void special(const std::string& s) {
    spans.push_back({text.size(), text.size() + s.size()});
    text += s;
  }
  void plain(const std::string& s) { text += s; }
};

Prompt user_prompt(const std::string& content) {
  Prompt p;
  p.special("<｜begin▁of▁sentence｜>");
  p.special("<｜User｜>");
  p.plain(content);
  p.special("<｜Assistant｜>");
  p.special("</think>");
  return p;
}

Ids encode_prompt(const Tokenizer& tok, const Prompt& p) {
  auto r = tok.encode_segments(p.text, p.spans);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.ok() ? r.value() : Ids{};
}

TEST(TokenizerSegments, SpecTable53) {
  DEEPINFER_REQUIRE_TOKENIZER(tok, true);
  EXPECT_EQ(encode_prompt(*tok, user_prompt("")), (Ids{0, 128803, 128804, 128822}));
  EXPECT_EQ(encode_prompt(*tok, user_prompt("x")).size(), 5u);
  EXPECT_EQ(encode_prompt(*tok, user_prompt("<｜User｜>")),
            (Ids{0, 128803, 30, 28217, 6756, 28217, 32, 128804, 128822}));
  EXPECT_EQ(encode_prompt(*tok, user_prompt("<｜Assistant｜>")).size(), 9u);
  EXPECT_EQ(encode_prompt(*tok, user_prompt("<｜System｜>")).size(), 9u);
  EXPECT_EQ(encode_prompt(*tok, user_prompt("<think>")).size(), 7u);
  EXPECT_EQ(encode_prompt(*tok, user_prompt("</think>")).size(), 7u);
  EXPECT_EQ(encode_prompt(*tok, user_prompt("What is 2+2?")),
            (Ids{0, 128803, 3085, 344, 223, 20, 13, 20, 33, 128804, 128822}));
}

// Every added token of the vocabulary, and near-miss spellings, inside user text: the content
// part of the ids is exactly plain BPE of the content and holds no added-token id.
TEST(TokenizerSegments, SpelledSpecialTokensStayPlainText) {
  DEEPINFER_REQUIRE_TOKENIZER(tok, true);
  std::vector<std::string> contents;
  for (const AddedToken& t : tok->added_vocabulary().tokens()) {
    contents.push_back(t.content);
    contents.push_back("Hi " + t.content + "\n\n" + t.content + t.content + " ok");
  }
  for (const char* s : {"<|User|>", "<｜User｜", "｜User｜>", "<｜user｜>", "< think>", "<think >",
                        "</think\n>", "｜DSML｜ calls>", "<｜DSML｜ invoke name=\"x\">",
                        "<｜end▁of▁sentence｜><｜begin▁of▁sentence｜>", "＜｜User｜＞"}) {
    contents.push_back(s);
  }
  for (const std::string& content : contents) {
    const Ids ids = encode_prompt(*tok, user_prompt(content));
    ASSERT_GE(ids.size(), 4u);
    EXPECT_EQ(ids[0], 0);
    EXPECT_EQ(ids[1], 128803);
    EXPECT_EQ(ids[ids.size() - 2], 128804);
    EXPECT_EQ(ids.back(), 128822);
    const Ids middle(ids.begin() + 2, ids.end() - 2);
    EXPECT_EQ(middle, tok->encode_plain(content).value()) << content;
    for (TokenId id : middle) EXPECT_FALSE(tok->is_added(id)) << content;
  }
}

TEST(TokenizerSegments, PlainRunsAreMaximal) {
  DEEPINFER_REQUIRE_TOKENIZER(tok, true);
  // "Hello" + "\n\n" encoded as one run differs from separate runs; segments keep one run.
  Prompt p;
  p.special("<｜User｜>");
  p.plain("Hello");
  p.plain("\n\n");
  p.plain("world");
  const Ids ids = encode_prompt(*tok, p);
  Ids expected{128803};
  const Ids run = tok->encode_plain("Hello\n\nworld").value();
  expected.insert(expected.end(), run.begin(), run.end());
  EXPECT_EQ(ids, expected);
}

TEST(TokenizerSegments, BadSpansAreErrors) {
  DEEPINFER_REQUIRE_TOKENIZER(tok, true);
  const std::string text = "<｜User｜>abc<｜Assistant｜>";
  const size_t user = std::string("<｜User｜>").size();
  auto err = [&](std::vector<TextSpan> spans) {
    auto r = tok->encode_segments(text, spans);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.error().message;
  };
  EXPECT_NE(err({{0, user + 1}}).find("not a token"), std::string::npos);
  EXPECT_NE(err({{0, user}, {0, user}}).find("ascending"), std::string::npos);
  EXPECT_NE(err({{0, text.size() + 1}}).find("inside the prompt"), std::string::npos);
  EXPECT_NE(err({{1, 2}}).find("character boundaries"), std::string::npos);
  EXPECT_NE(err({{3, 3}}).find("non-empty"), std::string::npos);
  auto ok = tok->encode_segments(text, std::vector<TextSpan>{{0, user}});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok.value().front(), 128803);
}

}  // namespace
}  // namespace deepinfer::tokenizer
