// Test helpers: reading reference tensors of a fixture folder (reference.safetensors).
#pragma once

#include <cstring>
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
