// tokenizer.json loading: a small synthetic byte-level BPE file loads and encodes; malformed or
// unsupported files are rejected with a message naming the problem.
#include <gtest/gtest.h>

#include <string>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {
namespace {

// 256 byte tokens, merges "a"+"b" → "ab" and "ab"+"c" → "abc", one added token.
std::string tiny_json(const std::string& patch_key = "", const std::string& patch_value = "") {
  std::string vocab;
  for (int b = 0; b < 256; ++b) {
    std::string t = byte_level_encode(std::string(1, static_cast<char>(b)));
    std::string esc;
    for (char c : t) {
      if (c == '"' || c == '\\') esc += '\\';
      esc += c;
    }
    vocab += "\"" + esc + "\":" + std::to_string(b) + ",";
  }
  vocab += "\"ab\":256,\"abc\":257";
  std::string j =
      "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":258,\"content\":\"<|x|>\","
      "\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,"
      "\"special\":true}],\"normalizer\":null,"
      "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
      "\"trim_offsets\":true,\"use_regex\":true},\"post_processor\":null,"
      "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"dropout\":null,"
      "\"unk_token\":null,\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,"
      "\"fuse_unk\":false,\"byte_fallback\":false,\"vocab\":{" +
      vocab + "},\"merges\":[\"a b\",[\"ab\",\"c\"]]}}";
  if (!patch_key.empty()) {
    const size_t at = j.find(patch_key);
    if (at != std::string::npos) j.replace(at, patch_key.size(), patch_value);
  }
  return j;
}

TEST(TokenizerLoader, TinyTokenizerEncodes) {
  auto tok = Tokenizer::from_json(tiny_json());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok.value()->encode("abc ab<|x|>").value(), (std::vector<TokenId>{257, 32, 256, 258}));
  EXPECT_EQ(tok.value()->encode_plain("abcc").value(), (std::vector<TokenId>{257, 99}));
  EXPECT_EQ(tok.value()->vocab_size(), 259u);
  EXPECT_EQ(tok.value()->decode(std::vector<TokenId>{257, 258}).value(), "abc<|x|>");
}

TEST(TokenizerLoader, RejectsWithClearMessages) {
  auto msg = [](const std::string& json) {
    auto r = Tokenizer::from_json(json);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.error().message;
  };
  EXPECT_NE(msg("{").find("tokenizer.json"), std::string::npos);
  EXPECT_NE(msg("[]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(
      msg(tiny_json("\"normalizer\":null", "\"normalizer\":{\"type\":\"NFC\"}")).find("normalizer"),
      std::string::npos);
  EXPECT_NE(msg(tiny_json("\"lstrip\":false", "\"lstrip\":true")).find("lstrip"),
            std::string::npos);
  EXPECT_NE(msg(tiny_json("\"a b\"", "\"a q\"")).find("not in the vocabulary"), std::string::npos);
  EXPECT_NE(msg(tiny_json("\"type\":\"BPE\"", "\"type\":\"WordPiece\"")).find("WordPiece"),
            std::string::npos);
  EXPECT_NE(msg(tiny_json("\"add_prefix_space\":false", "\"add_prefix_space\":true"))
                .find("add_prefix_space"),
            std::string::npos);
  EXPECT_NE(
      msg(tiny_json("\"byte_fallback\":false", "\"byte_fallback\":true")).find("byte_fallback"),
      std::string::npos);
  EXPECT_NE(msg(tiny_json("{\"type\":\"ByteLevel\",\"add_prefix_space\"",
                          "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":"
                          "\"Isolated\",\"invert\":false,\"x\""))
                .find("no ByteLevel step"),
            std::string::npos);
  std::string bad_regex = tiny_json("\"pre_tokenizer\":{",
                                    "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":"
                                    "[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},"
                                    "\"behavior\":\"Isolated\",\"invert\":false},{");
  bad_regex.replace(bad_regex.find("\"use_regex\":true}"), 17, "\"use_regex\":true}]}");
  EXPECT_NE(msg(bad_regex).find("regex does not compile"), std::string::npos);
  EXPECT_NE(msg(tiny_json("\"id\":258", "\"id\":-4")).find("out of range"), std::string::npos);
  EXPECT_FALSE(Tokenizer::from_path("/nonexistent/dir").ok());
}

}  // namespace
}  // namespace deepinfer::tokenizer
