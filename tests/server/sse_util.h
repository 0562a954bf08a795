// Reading SSE bodies in tests: the payloads of the "data:" lines, parsed Chat / legacy chunks.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"

namespace deepinfer::server::testing {

// The payloads of an SSE body's "data:" lines ("[DONE]" included).
inline std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return out;
}

// A JSON string field as std::string ("" when absent or not a string).
inline std::string text_of(const JsonObject& o, std::string_view key) {
  const Json* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
}

}  // namespace deepinfer::server::testing
