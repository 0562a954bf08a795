#include "recipe/render.h"

namespace deepinfer::recipe {

std::optional<EncodingVersion> encoding_from_name(std::string_view name) {
  if (name == "v4") return EncodingVersion::V4;
  if (name == "v41") return EncodingVersion::V41;
  return std::nullopt;
}

}  // namespace deepinfer::recipe
