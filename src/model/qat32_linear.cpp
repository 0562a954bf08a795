#include "model/qat32_linear.h"

#include <cstring>

#include "backend/cpu/quant_act.h"

namespace deepinfer::model {

void qat32_linear(const float* x, int64_t n, const cpu::WeightView& w, float* y, LinearOut out,
                  std::vector<float>& xq, cpu::ThreadPool* pool) {
  const bool quantized = w.format == cpu::WeightFormat::FP8_E4M3_BLOCK ||
                         w.format == cpu::WeightFormat::FP4_E2M1_BLOCK32;
  if (!quantized) {
    cpu::linear(x, n, w, y, pool);
    if (out == LinearOut::Bf16) cpu::round_bf16(y, n * w.out);
    return;
  }
  // The input's exact FP8 values (e4m3 · 2^k is a bf16 value), then a product that does not
  // quantize again; the kernels sum the exact block products in fp32.
  const size_t len = static_cast<size_t>(n * w.in);
  if (xq.size() < len) xq.resize(len);
  std::memcpy(xq.data(), x, len * sizeof(float));
  for (int64_t r = 0; r < n; ++r) cpu::fp8_act_quant_inplace(xq.data() + r * w.in, w.in, 32);
  cpu::WeightView v = w;
  v.quantize_input = false;
  cpu::linear(xq.data(), n, v, y, pool);
  cpu::round_bf16(y, n * w.out);
}

}  // namespace deepinfer::model
