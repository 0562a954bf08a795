#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "common/io.h"
#include "common/json.h"

namespace deepinfer::model {
namespace {

struct DTypeEntry {
  const char* name;
  DType dtype;
  int size;
};

constexpr DTypeEntry kDTypes[] = {
    {"F32", DType::F32, 4},         {"F16", DType::F16, 2},         {"BF16", DType::BF16, 2},
    {"F64", DType::F64, 8},         {"I64", DType::I64, 8},         {"I32", DType::I32, 4},
    {"I16", DType::I16, 2},         {"I8", DType::I8, 1},           {"U8", DType::U8, 1},
    {"BOOL", DType::BOOL, 1},       {"F8_E4M3", DType::F8_E4M3, 1}, {"F8_E5M2", DType::F8_E5M2, 1},
    {"F8_E8M0", DType::F8_E8M0, 1},
};

constexpr uint64_t kMaxHeader = 100u << 20;

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const char* dtype_name(DType d) {
  for (const auto& e : kDTypes) {
    if (e.dtype == d) return e.name;
  }
  return "?";
}

int dtype_size(DType d) {
  for (const auto& e : kDTypes) {
    if (e.dtype == d) return e.size;
  }
  return 0;
}

Result<std::map<std::string, TensorInfo>> SafetensorsFile::parse(const uint8_t* bytes, size_t size,
                                                                 const std::string& what) {
  if (size < 8) return Error{what + ": truncated safetensors file (no header length)"};
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > kMaxHeader || header_len > size - 8) {
    return Error{what + ": safetensors header length " + std::to_string(header_len) +
                 " exceeds the file (" + std::to_string(size) + " bytes)"};
  }
  auto json = parse_json(std::string_view(reinterpret_cast<const char*>(bytes + 8), header_len));
  if (!json) return Error{what + ": malformed safetensors header: " + json.error().message};
  if (!json.value().is_object()) return Error{what + ": safetensors header is not a JSON object"};
  const uint8_t* data = bytes + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  std::map<std::string, TensorInfo> out;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& kv : json.value().as_object()) {
    const std::string name(kv.key());
    if (name == "__metadata__") continue;
    const std::string where = what + ": tensor " + name;
    if (!kv.value().is_object()) return Error{where + ": entry is not an object"};
    const auto& e = kv.value().as_object();
    auto dt = e.find("dtype");
    auto sh = e.find("shape");
    auto off = e.find("data_offsets");
    if (dt == e.end() || !dt->value().is_string() || sh == e.end() || !sh->value().is_array() ||
        off == e.end() || !off->value().is_array() || off->value().as_array().size() != 2) {
      return Error{where + ": needs dtype, shape and data_offsets [begin, end]"};
    }
    TensorInfo t;
    bool known = false;
    for (const auto& d : kDTypes) {
      if (dt->value().as_string() == d.name) {
        t.dtype = d.dtype;
        known = true;
      }
    }
    if (!known) return Error{where + ": unknown dtype " + std::string(dt->value().as_string())};
    uint64_t numel = 1;
    for (const auto& d : sh->value().as_array()) {
      if (!d.is_int64() || d.as_int64() < 0 || d.as_int64() > (int64_t{1} << 40)) {
        return Error{where + ": bad shape"};
      }
      t.shape.push_back(d.as_int64());
      if (t.shape.back() != 0 &&
          numel > (uint64_t{1} << 48) / static_cast<uint64_t>(t.shape.back())) {
        return Error{where + ": shape too large"};
      }
      numel *= static_cast<uint64_t>(t.shape.back());
    }
    if (t.shape.size() > 8) return Error{where + ": more than 8 dimensions"};
    const auto& o = off->value().as_array();
    if (!o[0].is_int64() || !o[1].is_int64() || o[0].as_int64() < 0 ||
        o[1].as_int64() < o[0].as_int64()) {
      return Error{where + ": bad data_offsets"};
    }
    const uint64_t begin = static_cast<uint64_t>(o[0].as_int64());
    const uint64_t end = static_cast<uint64_t>(o[1].as_int64());
    if (end > data_size) {
      return Error{where + ": data [" + std::to_string(begin) + ", " + std::to_string(end) +
                   ") runs past the end of the file (truncated?)"};
    }
    if (end - begin != numel * static_cast<uint64_t>(dtype_size(t.dtype))) {
      return Error{where + ": " + std::to_string(end - begin) + " bytes for " +
                   std::to_string(numel) + " elements of " + dtype_name(t.dtype)};
    }
    t.data = data + begin;
    t.nbytes = static_cast<int64_t>(end - begin);
    ranges.emplace_back(begin, end);
    out.emplace(name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) return Error{what + ": overlapping tensor data"};
  }
  return out;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error{"cannot open " + path + ": " + std::strerror(errno)};
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    return Error{"cannot stat " + path};
  }
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile);
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* m = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      return Error{"cannot map " + path + ": " + std::strerror(errno)};
    }
    f->map_ = m;
  }
  ::close(fd);
  auto parsed = parse(static_cast<const uint8_t*>(f->map_), f->size_, path);
  if (!parsed) return parsed.error();
  f->tensors_ = std::move(parsed.value());
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) munmap(map_, size_);
}

const TensorInfo* Checkpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Result<Checkpoint> Checkpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  const std::string index = dir + "/model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(index, ec)) {
    auto text = read_file(index);
    if (!text) return Error{"cannot read " + index};
    auto json = parse_json(text.value());
    if (!json || !json.value().is_object() || !json.value().as_object().contains("weight_map") ||
        !json.value().as_object().at("weight_map").is_object()) {
      return Error{index + ": not a safetensors index (needs an object \"weight_map\")"};
    }
    for (const auto& kv : json.value().as_object().at("weight_map").as_object()) {
      if (!kv.value().is_string()) return Error{index + ": weight_map values must be file names"};
      const std::string f(kv.value().as_string());
      if (f.find('/') != std::string::npos || f.find("..") != std::string::npos) {
        return Error{index + ": shard name " + f + " leaves the folder"};
      }
      if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
    }
  } else if (fs::exists(dir + "/model.safetensors", ec)) {
    files.push_back("model.safetensors");
  } else {
    return Error{dir + " holds neither model.safetensors nor model.safetensors.index.json"};
  }
  Checkpoint c;
  for (const auto& f : files) {
    auto file = SafetensorsFile::open(dir + "/" + f);
    if (!file) return file.error();
    std::shared_ptr<SafetensorsFile> shared(std::move(file.value()));
    for (const auto& [name, info] : shared->tensors()) {
      if (!c.tensors_.emplace(name, info).second) {
        return Error{"tensor " + name + " appears in more than one shard"};
      }
    }
    c.files_.push_back(std::move(shared));
  }
  return c;
}

}  // namespace deepinfer::model
