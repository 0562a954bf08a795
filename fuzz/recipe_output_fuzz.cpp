// Fuzzes the output parser (encoding spec §4): random output bytes, random parsing options and
// stop sequences, random chunking. Must not crash, and the concatenated outputs of the whole
// input and of a random split must be identical (JSON mode: ignoring the spaces of ToSpace).
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "../tests/recipe/output_parser_test_util.h"

namespace {

using deepinfer::recipe::ParsingOptions;
using deepinfer::recipe::ReasoningInitialStage;
using deepinfer::recipe::Usage;
using deepinfer::recipe::testing::parse;
using deepinfer::recipe::testing::Parsed;
using deepinfer::recipe::testing::random_split;

// Input layout: [flags][stops][seed] then the model output.
//   flags bit 0: parse_tool_calls, bit 1: tool_call_initial_stage, bit 2: parse_json_output,
//         bits 3-4: reasoning_initial_stage, bit 5: legacy_argument_labels; stops: count (low 2
//         bits) and shape of the stop
//   sequences, which are cut from the output itself so that they do match.
ParsingOptions options_from(uint8_t flags, uint8_t stops, std::string_view text) {
  ParsingOptions o;
  o.parse_tool_calls = flags & 1;
  o.tool_call_initial_stage = flags & 2;
  o.parse_json_output = flags & 4;
  o.reasoning_initial_stage = static_cast<ReasoningInitialStage>((flags >> 3) & 3);
  o.legacy_argument_labels = flags & 32;
  const size_t count = stops & 3;
  for (size_t i = 0; i < count && !text.empty(); ++i) {
    const size_t at = (static_cast<size_t>(stops) * 131 + i * 977) % text.size();
    const size_t len = 1 + ((stops >> 2) + i) % 6;
    o.stop_sequences.emplace_back(text.substr(at, len));
  }
  return o;
}

Parsed normalized(Parsed p, const ParsingOptions& o) {
  p.usage = Usage{};
  if (o.parse_json_output) std::erase(p.content, ' ');
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 3, size - 3);
  const ParsingOptions o = options_from(data[0], data[1], text);
  const Parsed whole = normalized(parse(o, text), o);
  std::mt19937 rng(data[2]);
  const size_t k = 2 + rng() % 24;
  const Parsed split = normalized(parse(o, random_split(text, k, rng)), o);
  if (!(whole == split) || !whole.finished || whole.starts != 1) std::abort();
  return 0;
}
