// JSON values for the whole project: Boost.JSON (objects keep insertion order; int64, uint64 and
// double stay distinct kinds). parse_json() rejects invalid JSON and invalid UTF-8 with a message.
#pragma once

#include <boost/json.hpp>
#include <string>
#include <string_view>

#include "common/result.h"

namespace deepinfer {

using Json = boost::json::value;
using JsonObject = boost::json::object;
using JsonArray = boost::json::array;
using JsonString = boost::json::string;

// Parses one JSON document (no trailing garbage, no comments, nesting depth ≤ 256).
Result<Json> parse_json(std::string_view text);

// Compact serialization (Boost.JSON's own: ',' and ':' without spaces, non-ASCII kept raw).
std::string to_json(const Json& value);

}  // namespace deepinfer
