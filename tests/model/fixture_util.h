// Test helpers: reading reference tensors of a fixture folder (reference.safetensors).
#pragma once

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/safetensors.h"

namespace deepinfer::model::testing {

inline std::string fixture_dir(const std::string& name) {
  return std::string(DEEPINFER_SOURCE_DIR) + "/tests/fixtures/" + name;
}

struct Reference {
  std::unique_ptr<SafetensorsFile> file;

  static Reference open(const std::string& dir) {
    auto f = SafetensorsFile::open(dir + "/reference.safetensors");
    Reference r;
    if (f) r.file = std::move(f.value());
    return r;
  }
  bool ok() const { return file != nullptr; }
  const TensorInfo& info(const std::string& name) const { return file->tensors().at(name); }
  std::vector<float> f32(const std::string& name) const {
    const TensorInfo& t = info(name);
    std::vector<float> v(static_cast<size_t>(t.numel()));
    std::memcpy(v.data(), t.data, v.size() * 4);
    return v;
  }
  std::vector<int32_t> i32(const std::string& name) const {
    const TensorInfo& t = info(name);
    std::vector<int32_t> v(static_cast<size_t>(t.numel()));
    std::memcpy(v.data(), t.data, v.size() * 4);
    return v;
  }
};

inline float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

inline int argmax(const float* x, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

}  // namespace deepinfer::model::testing

namespace deepinfer::model::testing {

// A minimal safetensors writer for tests: name → (dtype, shape, bytes), sorted by name.
struct RawTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

inline std::string safetensors_image(const std::map<std::string, RawTensor>& tensors) {
  std::string header = "{";
  std::string data;
  bool first = true;
  for (const auto& [name, t] : tensors) {
    header += first ? "" : ",";
    first = false;
    header += "\"" + name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i)
      header += (i ? "," : "") + std::to_string(t.shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(data.size()) + "," +
              std::to_string(data.size() + t.bytes.size()) + "]}";
    data += t.bytes;
  }
  header += "}";
  while (header.size() % 8) header += ' ';
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

inline std::map<std::string, RawTensor> read_raw(const std::string& path) {
  std::map<std::string, RawTensor> out;
  auto f = SafetensorsFile::open(path);
  if (!f) return out;
  for (const auto& [name, t] : f.value()->tensors()) {
    out[name] = RawTensor{
        dtype_name(t.dtype), t.shape,
        std::string(reinterpret_cast<const char*>(t.data), static_cast<size_t>(t.nbytes))};
  }
  return out;
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace deepinfer::model::testing
