// Test helpers: the DeepSeek V4 / V4.1 tokenizers from the cache (built on first use with
// scripts/build_tokenizers.sh), loaded once per test binary.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "tokenizer/cache_dir.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer::testing {

inline std::string tokenizer_json_path(bool v41) {
  const std::string path = deepseek_tokenizer_dir(v41) + "/tokenizer.json";
  static bool built = false;
  if (!built) {
    built = true;
    const std::string cmd = std::string(DEEPINFER_SOURCE_DIR) + "/scripts/build_tokenizers.sh";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "build_tokenizers.sh failed\n");
  }
  return path;
}

// nullptr when the tokenizer cannot be built here (no npm data); callers GTEST_SKIP.
inline const Tokenizer* deepseek(bool v41 = true) {
  static std::unique_ptr<Tokenizer> cache[2];
  auto& slot = cache[v41 ? 1 : 0];
  if (!slot) {
    auto tok = Tokenizer::from_path(tokenizer_json_path(v41));
    if (!tok) {
      std::fprintf(stderr, "%s\n", tok.error().message.c_str());
      return nullptr;
    }
    slot = std::move(tok.value());
  }
  return slot.get();
}

}  // namespace deepinfer::tokenizer::testing

#define DEEPINFER_REQUIRE_TOKENIZER(var, v41)                                                    \
  const ::deepinfer::tokenizer::Tokenizer* var = ::deepinfer::tokenizer::testing::deepseek(v41); \
  if (var == nullptr) GTEST_SKIP() << "DeepSeek tokenizer not available (run scripts/setup.sh)"
