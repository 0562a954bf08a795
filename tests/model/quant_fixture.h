// Reads tests/fixtures/quant/quant_reference.safetensors (made on the GPU machine by
// tools/make_quant_fixture.py from torch's float8 conversions and the official kernel stand-ins).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "model/safetensors.h"

namespace deepinfer::quant_test {

class QuantFixture {
 public:
  static QuantFixture& get() {
    static QuantFixture f;
    return f;
  }
  bool ok() const { return file_ != nullptr; }
  const model::TensorInfo& info(const std::string& name) const { return file_->tensors().at(name); }
  std::vector<float> f32(const std::string& name) const {
    const auto& t = info(name);
    EXPECT_EQ(t.dtype, model::DType::F32) << name;
    std::vector<float> v(static_cast<size_t>(t.numel()));
    std::memcpy(v.data(), t.data, v.size() * sizeof(float));
    return v;
  }
  std::vector<uint8_t> u8(const std::string& name) const {
    const auto& t = info(name);
    EXPECT_EQ(t.dtype, model::DType::U8) << name;
    return std::vector<uint8_t>(t.data, t.data + t.numel());
  }

 private:
  QuantFixture() {
    auto r = model::SafetensorsFile::open(std::string(DEEPINFER_SOURCE_DIR) +
                                          "/tests/fixtures/quant/quant_reference.safetensors");
    if (r.ok()) file_ = std::move(r.value());
  }
  std::unique_ptr<model::SafetensorsFile> file_;
};

// Bitwise float equality (NaN equals NaN of any payload; -0 differs from +0).
inline bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

}  // namespace deepinfer::quant_test
