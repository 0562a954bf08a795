#include "model/tensor_reader.h"

#include <cstring>

#include "backend/cpu/quant_act.h"
#include "backend/cpu/quant_linear.h"
#include "backend/cpu/simd.h"

namespace deepinfer::model {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

const TensorInfo* TensorReader::get(const std::string& name, const std::vector<int64_t>& shape) {
  const TensorInfo* t = ckpt_.find(name);
  if (!t) {
    fail("missing tensor " + name);
    return nullptr;
  }
  if (t->shape != shape) {
    fail("tensor " + name + " has shape " + shape_str(t->shape) + ", expected " + shape_str(shape));
    return nullptr;
  }
  return t;
}

cpu::WeightView TensorReader::matrix(const std::string& name, int64_t out, int64_t in) {
  using cpu::WeightFormat;
  cpu::WeightView v;
  v.out = out;
  v.in = in;
  const TensorInfo* raw = ckpt_.find(name);
  if (!raw) {
    fail("missing tensor " + name);
    return v;
  }
  const bool fp4 = raw->dtype == DType::I8 || raw->dtype == DType::U8;
  const TensorInfo* t = get(name, {out, fp4 ? in / 2 : in});
  if (!t) return v;
  v.data = t->data;
  switch (t->dtype) {
    case DType::F32:
      v.format = WeightFormat::F32;
      return v;
    case DType::BF16:
      v.format = WeightFormat::BF16;
      return v;
    case DType::F8_E4M3:
      v.format = WeightFormat::FP8_E4M3_BLOCK;
      v.block_out = 32;
      v.block_in = 32;
      break;
    case DType::I8:
    case DType::U8:
      v.format = WeightFormat::FP4_E2M1_BLOCK32;
      v.block_out = 1;
      v.block_in = 32;
      if (in % 32) fail("tensor " + name + ": FP4 needs in % 32 == 0");
      break;
    default:
      fail("tensor " + name + " has dtype " + dtype_name(t->dtype) +
           "; matrices must be F32, BF16, F8_E4M3 or packed FP4 (I8)");
      return v;
  }
  std::string base = name.substr(0, name.size() - (name.ends_with(".weight") ? 7 : 0));
  const int64_t so = (out + v.block_out - 1) / v.block_out, si = (in + v.block_in - 1) / v.block_in;
  const TensorInfo* s = get(base + ".scale", {so, si});
  if (!s) return v;
  if (s->dtype == DType::F8_E8M0 || s->dtype == DType::U8) {
    v.scale_format = cpu::ScaleFormat::UE8M0;
  } else if (s->dtype == DType::F32) {
    v.scale_format = cpu::ScaleFormat::F32;
  } else {
    fail("scale tensor " + base + ".scale has dtype " + dtype_name(s->dtype) + " (F8_E8M0 or F32)");
    return v;
  }
  v.scale = s->data;
  v.scale_stride = si;
  if (!cpu::linear_supported(v.format))
    cpu::register_quant_kernels(cpu::QuantActivations::Official);
  return v;
}

std::vector<float> TensorReader::floats(const std::string& name,
                                        const std::vector<int64_t>& shape) {
  std::vector<float> out;
  const TensorInfo* t = get(name, shape);
  if (!t) return out;
  const int64_t n = t->numel();
  out.resize(static_cast<size_t>(n));
  if (t->dtype == DType::F32) {
    std::memcpy(out.data(), t->data, static_cast<size_t>(n) * 4);
  } else if (t->dtype == DType::BF16) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t b;
      std::memcpy(&b, t->data + 2 * i, 2);
      out[static_cast<size_t>(i)] = cpu::bf16_to_f32(b);
    }
  } else {
    fail("tensor " + name + " has dtype " + dtype_name(t->dtype) + " (F32 or BF16 expected)");
    out.clear();
  }
  return out;
}

std::vector<float> dequantize_matrix(const cpu::WeightView& w) {
  std::vector<float> out(static_cast<size_t>(w.out * w.in));
  for (int64_t r = 0; r < w.out; ++r) cpu::dequantize_row(w, r, out.data() + r * w.in);
  cpu::round_bf16(out.data(), w.out * w.in);
  return out;
}

}  // namespace deepinfer::model
