// Differential test against the JS reference (@lenml/tokenizers, run by node): the corpus of
// tests/js/tokenizer_corpus.mjs (>= 2,000 strings) must encode to identical ids, and
// decode(encode(x)) == x for every string.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_tokenizers.h"

namespace deepinfer::tokenizer {
namespace {

struct Case {
  std::string text;
  std::vector<TokenId> ids;
};

std::vector<Case> reference_cases(const std::string& tokenizer_json) {
  const std::string cmd = "node " + std::string(DEEPINFER_SOURCE_DIR) +
                          "/tests/js/tokenizer_reference.mjs '" + tokenizer_json + "'";
  std::vector<Case> cases;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return cases;
  std::string data;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) data.append(buf, n);
  pclose(pipe);
  size_t pos = 0;
  while (pos < data.size()) {
    size_t end = data.find('\n', pos);
    if (end == std::string::npos) end = data.size();
    if (end > pos) {
      auto j = nlohmann::json::parse(data.substr(pos, end - pos));
      cases.push_back({j["text"].get<std::string>(), j["ids"].get<std::vector<TokenId>>()});
    }
    pos = end + 1;
  }
  return cases;
}

bool spells_added_token(const Tokenizer& tok, const std::string& text) {
  for (const AddedToken& t : tok.added_vocabulary().tokens()) {
    if (text.find(t.content) != std::string::npos) return true;
  }
  return false;
}

void run_differential(bool v41) {
  DEEPINFER_REQUIRE_TOKENIZER(tok, v41);
  const auto cases = reference_cases(testing::tokenizer_json_path(v41));
  ASSERT_GE(cases.size(), 2000u) << "node reference produced too few cases";
  int mismatches = 0, plain_checked = 0;
  for (const Case& c : cases) {
    auto ids = tok->encode(c.text);
    ASSERT_TRUE(ids.ok()) << ids.error().message;
    if (ids.value() != c.ids && ++mismatches <= 10) {
      ADD_FAILURE() << "ids differ for " << nlohmann::json(c.text).dump()
                    << "\n  js:  " << nlohmann::json(c.ids).dump()
                    << "\n  c++: " << nlohmann::json(ids.value()).dump();
    }
    auto text = tok->decode(ids.value());
    ASSERT_TRUE(text.ok()) << text.error().message;
    EXPECT_EQ(text.value(), c.text) << "decode(encode(x)) != x";
    if (!spells_added_token(*tok, c.text)) {
      ++plain_checked;
      auto plain = tok->encode_plain(c.text);
      ASSERT_TRUE(plain.ok());
      EXPECT_EQ(plain.value(), c.ids) << "plain encode differs for " << c.text;
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << cases.size() << " strings";
  EXPECT_GT(plain_checked, 1000);
}

TEST(TokenizerDifferential, V41MatchesJsReference) { run_differential(true); }
TEST(TokenizerDifferential, V4MatchesJsReference) { run_differential(false); }

}  // namespace
}  // namespace deepinfer::tokenizer
