// Where scripts/build_tokenizers.sh puts the DeepSeek tokenizers:
// ${DEEPINFER_CACHE:-$HOME/.cache/deepinfer}/tokenizers/deepseek-v4 and .../deepseek-v41.
#pragma once

#include <string>

namespace deepinfer::tokenizer {

// Directory of the cached DeepSeek V4.1 (v41 = true) or V4 tokenizer.json.
std::string deepseek_tokenizer_dir(bool v41);

}  // namespace deepinfer::tokenizer
