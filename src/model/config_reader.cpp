#include "model/config_reader.h"

#include <cmath>

#include "common/io.h"

namespace deepinfer::model {
namespace {

std::string quoted(std::initializer_list<const char*> keys) {
  return std::string("\"") + *keys.begin() + "\"";
}

}  // namespace

const Json* find_config_key(const JsonObject& o, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    auto it = o.find(k);
    if (it != o.end() && !it->value().is_null()) return &it->value();
  }
  return nullptr;
}

bool json_number(const Json& v, double* out) {
  if (v.is_int64()) {
    *out = static_cast<double>(v.as_int64());
  } else if (v.is_uint64()) {
    *out = static_cast<double>(v.as_uint64());
  } else if (v.is_double()) {
    *out = v.as_double();
  } else {
    return false;
  }
  return true;
}

Result<Json> read_config_json(const std::string& dir) {
  auto text = read_file(dir + "/config.json");
  if (!text.ok()) return Error{"cannot read " + dir + "/config.json: " + text.error().message};
  auto json = parse_json(text.value());
  if (!json.ok()) return Error{"config.json: " + json.error().message};
  return std::move(json.value());
}

void ConfigReader::fail(const std::string& message) {
  if (error.empty()) error = message;
}

double ConfigReader::number(std::initializer_list<const char*> keys, double fallback,
                            bool required) {
  const Json* v = find_config_key(o, keys);
  if (!v) {
    if (required) fail("config.json lacks " + quoted(keys));
    return fallback;
  }
  double d = fallback;
  if (!json_number(*v, &d)) {
    fail("config.json: " + quoted(keys) + " is not a number");
    return fallback;
  }
  return d;
}

int64_t ConfigReader::integer64(std::initializer_list<const char*> keys, int64_t fallback,
                                bool required) {
  const double d = number(keys, static_cast<double>(fallback), required);
  if (!(d == std::floor(d) && std::fabs(d) < 9e15)) {
    fail("config.json: " + quoted(keys) + " is not an integer");
    return fallback;
  }
  return static_cast<int64_t>(d);
}

int ConfigReader::integer(std::initializer_list<const char*> keys, int fallback, bool required) {
  const int64_t v = integer64(keys, fallback, required);
  if (v < -2147483648LL || v > 2147483647LL) {
    fail("config.json: " + quoted(keys) + " is out of range");
    return fallback;
  }
  return static_cast<int>(v);
}

bool ConfigReader::flag(std::initializer_list<const char*> keys, bool fallback) {
  const Json* v = find_config_key(o, keys);
  if (!v) return fallback;
  if (v->is_bool()) return v->as_bool();
  double d = 0;
  if (!json_number(*v, &d)) {
    fail("config.json: " + quoted(keys) + " is not a bool");
    return fallback;
  }
  return d != 0.0;
}

std::string ConfigReader::text(std::initializer_list<const char*> keys,
                               const std::string& fallback) {
  const Json* v = find_config_key(o, keys);
  if (!v) return fallback;
  if (!v->is_string()) {
    fail("config.json: " + quoted(keys) + " is not a string");
    return fallback;
  }
  return std::string(v->as_string());
}

template <class T>
std::vector<T> ConfigReader::list(std::initializer_list<const char*> keys, bool required) {
  std::vector<T> out;
  const Json* v = find_config_key(o, keys);
  if (!v) {
    if (required) fail("config.json lacks " + quoted(keys));
    return out;
  }
  if (!v->is_array()) {
    fail("config.json: " + quoted(keys) + " is not a list");
    return out;
  }
  for (const Json& e : v->as_array()) {
    double d = 0;
    if (!json_number(e, &d) || d != std::floor(d) || std::fabs(d) >= 9e15) {
      fail("config.json: " + quoted(keys) + " holds a non-integer");
      return {};
    }
    out.push_back(static_cast<T>(d));
  }
  return out;
}

template std::vector<int> ConfigReader::list<int>(std::initializer_list<const char*>, bool);
template std::vector<int64_t> ConfigReader::list<int64_t>(std::initializer_list<const char*>, bool);

}  // namespace deepinfer::model
