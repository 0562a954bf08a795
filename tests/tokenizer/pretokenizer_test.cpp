// Pre-tokenizer: the DeepSeek Split sequence, HF's Split behaviors (HF documentation example
// "the-final--countdown"), and the Oniguruma meaning of `\s` kept under PCRE2.
#include "tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace deepinfer::tokenizer {
namespace {

using Pieces = std::vector<std::string>;

std::unique_ptr<PreTokenizer> make(std::vector<SplitRule> rules) {
  auto r = PreTokenizer::create(std::move(rules));
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r.value()) : nullptr;
}

std::unique_ptr<PreTokenizer> deepseek() {
  const std::string main_re =
      "[!\"#$%&'()*+,\\-./"
      ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
      " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";
  return make({{translate_oniguruma_pattern("\\p{N}{1,3}"), false, SplitBehavior::kIsolated, false},
               {translate_oniguruma_pattern("[一-龥぀-ゟ゠-ヿ]+"), false,
                SplitBehavior::kIsolated, false},
               {translate_oniguruma_pattern(main_re), false, SplitBehavior::kIsolated, false}});
}

TEST(PreTokenizer, DeepSeekPieces) {
  auto pt = deepseek();
  ASSERT_NE(pt, nullptr);
  EXPECT_EQ(pt->split_to_strings("Hello, world!"), (Pieces{"Hello", ",", " world", "!"}));
  EXPECT_EQ(pt->split_to_strings("1234567 ab"), (Pieces{"123", "456", "7", " ab"}));
  EXPECT_EQ(pt->split_to_strings("你好world"), (Pieces{"你好", "world"}));
  EXPECT_EQ(pt->split_to_strings("a  \n\nb"), (Pieces{"a", "  \n\n", "b"}));
  EXPECT_EQ(pt->split_to_strings("x   y"), (Pieces{"x", "  ", " y"}));
  EXPECT_EQ(pt->split_to_strings(".hello"), (Pieces{".hello"}));
}

TEST(PreTokenizer, WhitespaceFollowsOniguruma) {
  auto pt = deepseek();
  ASSERT_NE(pt, nullptr);
  // U+0085 is White_Space (Oniguruma and PCRE2 agree): " \u0085" is one trailing space run.
  EXPECT_EQ(pt->split_to_strings("a \u0085"), (Pieces{"a", " \u0085"}));
  // U+180E is not White_Space for Oniguruma (PCRE2's UCP \s would say it is): the space before it
  // is a run of its own and U+180E starts a letter piece.
  EXPECT_EQ(pt->split_to_strings("a \u180eb"), (Pieces{"a", " ", "\u180eb"}));
  EXPECT_EQ(pt->split_to_strings("a \u180e"), (Pieces{"a", " ", "\u180e"}));
  // U+FEFF is not White_Space either (the JS reference disagrees; HF uses Oniguruma).
  EXPECT_EQ(pt->split_to_strings("a \ufeff"), (Pieces{"a", " ", "\ufeff"}));
}

TEST(PreTokenizer, SplitBehaviorsOfTheHfDocumentation) {
  const std::string text = "the-final--countdown";
  auto with = [&](SplitBehavior b) {
    auto pt = make({{"-", true, b, false}});
    return pt->split_to_strings(text);
  };
  EXPECT_EQ(with(SplitBehavior::kRemoved), (Pieces{"the", "final", "countdown"}));
  EXPECT_EQ(with(SplitBehavior::kIsolated), (Pieces{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(with(SplitBehavior::kMergedWithPrevious), (Pieces{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(with(SplitBehavior::kMergedWithNext), (Pieces{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(with(SplitBehavior::kContiguous), (Pieces{"the", "-", "final", "--", "countdown"}));
  auto inverted = make({{"-", true, SplitBehavior::kRemoved, true}});
  EXPECT_EQ(inverted->split_to_strings(text), (Pieces{"-", "-", "-"}));
}

TEST(PreTokenizer, TranslationKeepsOtherSyntax) {
  EXPECT_EQ(translate_oniguruma_pattern("a\\sb"), "a(?:(?!\\x{180e})\\s)b");
  EXPECT_EQ(translate_oniguruma_pattern("(?!\\S)"), "(?!(?:\\S|\\x{180e}))");
  EXPECT_EQ(translate_oniguruma_pattern("[^\\s\\p{L}]"), "(?:\\x{180e}|[^\\s\\p{L}])");
  EXPECT_EQ(translate_oniguruma_pattern("[\\[\\]]x"), "[\\[\\]]x");
  EXPECT_FALSE(PreTokenizer::create({{"(", false, SplitBehavior::kIsolated, false}}).ok());
}

}  // namespace
}  // namespace deepinfer::tokenizer
