#include "common/json.h"

namespace deepinfer {

Result<Json> parse_json(std::string_view text) {
  boost::json::parse_options options;
  options.max_depth = 256;
  boost::system::error_code ec;
  Json value = boost::json::parse(text, ec, {}, options);
  if (ec) return Error{"invalid JSON: " + ec.message()};
  return value;
}

std::string to_json(const Json& value) { return boost::json::serialize(value); }

}  // namespace deepinfer
