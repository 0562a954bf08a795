// Fuzz target: the safetensors header parser (and, for inputs that start with '{', the model
// config parser). Whatever the bytes, the result is a value or an error, never a crash, and every
// tensor view of a successful parse lies inside the input.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/json.h"
#include "model/config.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer;
  if (size > 0 && data[0] == '{') {
    auto json = parse_json(std::string_view(reinterpret_cast<const char*>(data), size));
    if (json) (void)model::parse_model_config(json.value());
    return 0;
  }
  auto parsed = model::SafetensorsFile::parse(data, size, "fuzz");
  if (!parsed) return 0;
  unsigned sum = 0;
  for (const auto& [name, t] : parsed.value()) {
    if (t.data < data || t.data + t.nbytes > data + size) __builtin_trap();
    for (int64_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
  }
  return static_cast<int>(sum & 0);
}
