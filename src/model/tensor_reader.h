// Reads named tensors of a Checkpoint for the V4.1 Engram and DSpark loaders: matrices as
// WeightViews (F32, BF16, FP8 e4m3 with 32×32 UE8M0 block scales, FP4 e2m1 pairs with per-32
// UE8M0 scales) and small vectors as fp32 copies. The first problem is kept as the error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/cpu/weight_view.h"
#include "common/result.h"
#include "model/safetensors.h"

namespace deepinfer::model {

class TensorReader {
 public:
  explicit TensorReader(const Checkpoint& checkpoint) : ckpt_(checkpoint) {}

  bool ok() const { return error_.empty(); }
  Error error() const { return Error{error_}; }
  bool has(const std::string& name) const { return ckpt_.find(name) != nullptr; }

  // The tensor, or null (and an error) when it is missing or its shape differs.
  const TensorInfo* get(const std::string& name, const std::vector<int64_t>& shape);
  // A matrix [out, in]; FP8 / FP4 read "<base>.scale" beside "<base>.weight".
  cpu::WeightView matrix(const std::string& name, int64_t out, int64_t in);
  // F32 or BF16 values as fp32.
  std::vector<float> floats(const std::string& name, const std::vector<int64_t>& shape);

  void fail(const std::string& message) {
    if (error_.empty()) error_ = message;
  }

 private:
  const Checkpoint& ckpt_;
  std::string error_;
};

// Matrix [out, in] as bf16-valued fp32 (wo_a: the reference dequantizes it to bf16).
std::vector<float> dequantize_matrix(const cpu::WeightView& w);

}  // namespace deepinfer::model
