// Fuzz target: encoding arbitrary bytes with a small DeepSeek-style tokenizer (the V3/V4 Split
// sequence, byte-level BPE, added tokens). Invalid UTF-8 must be an error; valid text must
// round-trip through decode and the streaming decoder, and threads must not change the ids.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

using deepinfer::tokenizer::Tokenizer;

std::unique_ptr<Tokenizer> make_tokenizer() {
  namespace json = boost::json;
  using deepinfer::tokenizer::byte_level_encode;
  json::object vocab;
  for (int b = 0; b < 256; ++b) vocab[byte_level_encode(std::string(1, static_cast<char>(b)))] = b;
  json::array merges;
  const std::string g = byte_level_encode(" ");
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {g, "t"},       {"t", "h"},      {"th", "e"}, {g, "a"}, {"i", "n"},
      {g + "t", "h"}, {g + "th", "e"}, {"e", "r"},  {g, g},   {g + g, g + g},
      {"1", "2"},     {"ä", "¸"},      {"Ċ", "Ċ"}};
  for (const auto& [a, b] : pairs) {
    if (!vocab.contains(a + b)) vocab[a + b] = static_cast<int64_t>(vocab.size());
    merges.emplace_back(json::string(a + " " + b));
  }
  json::array added;
  int64_t next = static_cast<int64_t>(vocab.size());
  for (const char* c :
       {"<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "<｜begin▁of▁sentence｜>"}) {
    added.push_back(json::object{{"id", next++},
                                 {"content", c},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", true},
                                 {"special", false}});
  }
  auto split = [](const char* re) {
    return json::object{{"type", "Split"},
                        {"pattern", json::object{{"Regex", re}}},
                        {"behavior", "Isolated"},
                        {"invert", false}};
  };
  json::object root{
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       json::object{
           {"type", "Sequence"},
           {"pretokenizers",
            json::array{
                split("\\p{N}{1,3}"), split("[一-龥぀-ゟ゠-ヿ]+"),
                split("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}"
                      "\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|"
                      "\\s+(?!\\S)|\\s+"),
                json::object{
                    {"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"decoder", json::object{{"type", "ByteLevel"}}},
      {"model", json::object{{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  auto tok = Tokenizer::from_json(deepinfer::to_json(root));
  if (!tok) {
    std::fprintf(stderr, "%s\n", tok.error().message.c_str());
    std::abort();
  }
  return std::move(tok.value());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<Tokenizer> tok = make_tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto ids = tok->encode(text);
  auto plain = tok->encode_plain(text);
  if (!deepinfer::tokenizer::is_valid_utf8(text)) {
    if (ids.ok() || plain.ok()) std::abort();
  } else {
    if (!ids.ok() || !plain.ok()) std::abort();
    if (tok->decode(ids.value()).value() != text) std::abort();
    if (tok->decode(plain.value()).value() != text) std::abort();
    if (tok->encode(text, 3).value() != ids.value()) std::abort();
    deepinfer::tokenizer::IncrementalDecoder dec(*tok);
    std::string stream;
    for (auto id : plain.value()) {
      if (!dec.push(id, stream).ok()) std::abort();
    }
    dec.finish(stream);
    if (stream != text) std::abort();
  }
  // The same bytes as a list of ids: decode must not crash; stream must agree with decode.
  std::vector<deepinfer::tokenizer::TokenId> raw;
  for (size_t i = 0; i + 2 <= size; i += 2) raw.push_back((data[i] << 8 | data[i + 1]) % 300);
  auto decoded = tok->decode(raw);
  if (decoded.ok()) {
    deepinfer::tokenizer::IncrementalDecoder dec(*tok);
    std::string stream;
    for (auto id : raw) {
      if (!dec.push(id, stream).ok()) std::abort();
    }
    dec.finish(stream);
    if (stream != decoded.value()) std::abort();
  }
  return 0;
}
