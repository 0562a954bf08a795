// Fuzzes request conversion: the first byte picks the protocol (mod 3), the rest is the JSON
// body. Invalid JSON is skipped; any JSON value must convert or fail with an error, never crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/json.h"
#include "recipe/convert.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer;
  if (size == 0) return 0;
  static constexpr recipe::Protocol kProtocols[] = {
      recipe::Protocol::ChatCompletions, recipe::Protocol::Responses, recipe::Protocol::Messages};
  recipe::Protocol protocol = kProtocols[data[0] % 3];
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  Result<Json> body = parse_json(text);
  if (!body.ok()) return 0;
  for (bool thinking : {true, false}) {
    recipe::ConversionOptions options;
    options.default_thinking_mode = thinking;
    options.responses_web_search =
        thinking ? recipe::WebSearchPolicy::Ignore : recipe::WebSearchPolicy::Reject;
    options.messages_web_search =
        thinking ? recipe::WebSearchPolicy::Reject : recipe::WebSearchPolicy::Ignore;
    auto result = recipe::convert_request(protocol, body.value(), options);
    if (!result.ok() && result.error().detail.empty()) __builtin_trap();
  }
  return 0;
}
