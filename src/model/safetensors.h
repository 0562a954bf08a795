// Read-only safetensors files, memory-mapped: the JSON header is validated (offsets inside the
// file, sizes matching dtype × shape, no overlaps) and every tensor is a zero-copy view into the
// mapping. A checkpoint folder is model.safetensors or a sharded model.safetensors.index.json.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace deepinfer::model {

enum class DType { F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL, F8_E4M3, F8_E5M2, F8_E8M0 };

struct TensorInfo {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the mapping
  int64_t nbytes = 0;
  int64_t numel() const;
};

const char* dtype_name(DType d);
int dtype_size(DType d);

// One mapped file. parse() works on any byte buffer (the fuzz target uses it directly).
class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  // Validates a whole file image held in memory (not copied: `bytes` must outlive the result).
  static Result<std::map<std::string, TensorInfo>> parse(const uint8_t* bytes, size_t size,
                                                         const std::string& what);
  ~SafetensorsFile();
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }

 private:
  SafetensorsFile() = default;
  void* map_ = nullptr;
  size_t size_ = 0;
  std::map<std::string, TensorInfo> tensors_;
};

// All tensors of a checkpoint folder, by stored name.
class Checkpoint {
 public:
  static Result<Checkpoint> open(const std::string& dir);
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;

 private:
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, TensorInfo> tensors_;
};

}  // namespace deepinfer::model
