// Segment-parallel encoding: every safe cut splits a text into halves whose ids concatenate to
// the ids of the whole, and multi-threaded encoding equals sequential encoding, on random and
// adversarial texts.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "test_tokenizers.h"

namespace deepinfer::tokenizer {
namespace {

using Ids = std::vector<TokenId>;

// Fragments chosen to sit next to the cut rules: newlines followed by every kind of character,
// spaces between letters, digits, CJK, marks, punctuation, and the Unicode spaces.
const std::vector<std::string> kFragments = {
    "\n",      "\n\n",     "\r\n",     " ",      "  ",       "\t",         "a",        "Z",
    "word",    " word",    "x\n",      "\ny",    "\n1",      "123",        "4567",     "中文",
    "日本",    "\n中",     "é",        "\u0301", "\n\u0301", ".",          "!\n",      "?!",
    "'s",      "-x",       "\u00a0",   "\u3000", "\u2028",   "\u0085",     "\u180e",   "\ufeff",
    "\u200b",  "\n\u00a0", "\n\u3000", "😀",      "\n😀",      "<｜User｜>", "</think>", "ab cd",
    "a b",     "\n ",      " \n",      "\t\n",   "=\n=",     "#",          "\n#",      "\n\n\n",
    "Ω",       "\nΩ",      "٣",        "\n٣",    "ｶ",        "\u200d",     "\n\u200d", "\u00ad",
    "\n\u00ad"};

std::string random_text(std::mt19937& rng, size_t fragments) {
  std::uniform_int_distribution<size_t> pick(0, kFragments.size() - 1);
  std::string s;
  for (size_t i = 0; i < fragments; ++i) s += kFragments[pick(rng)];
  return s;
}

TEST(TokenizerParallel, EverySafeCutPreservesIds) {
  DEEPINFER_REQUIRE_TOKENIZER(tok, true);
  std::mt19937 rng(7);
  size_t cuts = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    const std::string text = random_text(rng, 3 + iter % 20);
    const Ids whole = tok->encode_plain(text).value();
    for (size_t p = 1; p < text.size(); ++p) {
      if (!Tokenizer::is_safe_cut(text, p)) continue;
      ++cuts;
      Ids joined = tok->encode_plain(text.substr(0, p)).value();
      const Ids tail = tok->encode_plain(text.substr(p)).value();
      joined.insert(joined.end(), tail.begin(), tail.end());
      ASSERT_EQ(joined, whole) << "cut at " << p << " of " << ::testing::PrintToString(text);
    }
  }
  EXPECT_GT(cuts, 2000u);
}

TEST(TokenizerParallel, ThreadsGiveSequentialIds) {
  DEEPINFER_REQUIRE_TOKENIZER(tok, true);
  std::mt19937 rng(11);
  std::vector<std::string> texts;
  for (int i = 0; i < 2; ++i) texts.push_back(random_text(rng, 25000));
  // Adversarial: one giant line without newlines, long letter runs, long space runs.
  std::string line;
  for (int i = 0; i < 12000; ++i) line += (i % 7 == 0 ? "word, " : "alpha beta ");
  texts.push_back(line);
  texts.push_back(std::string(100000, 'a') + "\n" + std::string(50000, ' ') + "b");
  std::string cjk;
  for (int i = 0; i < 12000; ++i) cjk += "中文字\n";
  texts.push_back(cjk);
  EXPECT_TRUE(tok->safe_cuts(texts[3], 16 * 1024).empty());  // no cut point: runs sequentially
  for (const std::string& text : texts) {
    if (&text != &texts[3]) {
      EXPECT_FALSE(tok->safe_cuts(text, 16 * 1024).empty());
    }
    const Ids sequential = tok->encode_plain(text, 1).value();
    for (int threads : {2, 3, 4}) {
      EXPECT_EQ(tok->encode_plain(text, threads).value(), sequential) << threads;
    }
    EXPECT_EQ(tok->encode(text, 4).value(), tok->encode(text, 1).value());
  }
}

}  // namespace
}  // namespace deepinfer::tokenizer
