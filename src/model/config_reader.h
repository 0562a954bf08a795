// Typed reads of config.json fields for the V4 and V4.1 config parsers: a field may go by
// several names (published, official, HF), null counts as absent, and the first problem is kept
// as one readable error ("config.json lacks \"x\"", "\"x\" is not a number", ...).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/result.h"

namespace deepinfer::model {

// The first of `keys` present in `o` with a non-null value.
const Json* find_config_key(const JsonObject& o, std::initializer_list<const char*> keys);
// An int64, uint64 or double as a double; false for any other kind.
bool json_number(const Json& v, double* out);
// config.json of a model folder, parsed.
Result<Json> read_config_json(const std::string& dir);

struct ConfigReader {
  const JsonObject& o;
  std::string error;  // the first problem met, empty while all is well

  void fail(const std::string& message);
  double number(std::initializer_list<const char*> keys, double fallback, bool required);
  int64_t integer64(std::initializer_list<const char*> keys, int64_t fallback, bool required);
  int integer(std::initializer_list<const char*> keys, int fallback, bool required);
  // A JSON bool, or a number read as (value != 0).
  bool flag(std::initializer_list<const char*> keys, bool fallback);
  std::string text(std::initializer_list<const char*> keys, const std::string& fallback);
  template <class T>
  std::vector<T> list(std::initializer_list<const char*> keys, bool required);
};

extern template std::vector<int> ConfigReader::list<int>(std::initializer_list<const char*>, bool);
extern template std::vector<int64_t> ConfigReader::list<int64_t>(std::initializer_list<const char*>,
                                                                 bool);

}  // namespace deepinfer::model
