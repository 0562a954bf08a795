// Fuzz target: tokenizer.json loading. Any input must load or fail with an error, never crash;
// a tokenizer that loads must encode and decode a fixed text consistently.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using deepinfer::tokenizer::Tokenizer;
  auto tok = Tokenizer::from_json(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!tok) return 0;
  const std::string text = "Hello, world! 123 中文 <｜User｜>\n\n  x";
  auto ids = tok.value()->encode(text);
  if (!ids) return 0;  // e.g. a regex that hits PCRE2 limits
  auto back = tok.value()->decode(ids.value());
  if (!back) std::abort();
  deepinfer::tokenizer::IncrementalDecoder dec(*tok.value());
  std::string stream;
  for (auto id : ids.value()) {
    if (!dec.push(id, stream).ok()) std::abort();
  }
  dec.finish(stream);
  if (stream != back.value()) std::abort();
  return 0;
}
