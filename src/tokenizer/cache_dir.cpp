// Cache directory of the built DeepSeek tokenizers (see cache_dir.h).
#include "tokenizer/cache_dir.h"

#include <cstdlib>

namespace deepinfer::tokenizer {

std::string deepseek_tokenizer_dir(bool v41) {
  std::string root;
  if (const char* c = std::getenv("DEEPINFER_CACHE"); c != nullptr && *c != '\0') {
    root = c;
  } else {
    const char* home = std::getenv("HOME");
    root = std::string(home != nullptr ? home : ".") + "/.cache/deepinfer";
  }
  return root + (v41 ? "/tokenizers/deepseek-v41" : "/tokenizers/deepseek-v4");
}

}  // namespace deepinfer::tokenizer
