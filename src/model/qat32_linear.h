// The linear of DeepSeek V4.1's reference numerics on fp32 buffers holding bf16 values: before an
// FP8 (32×32 blocks) or FP4 (×32) weight the input is FP8-quantized per 1×32 with UE8M0 scales
// (act_quant), products are summed in fp32 and the output is rounded to bf16. BF16/F32 weights
// use the input as is; their output is bf16 (a bf16 Linear) or fp32 (fp32 parameters).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "backend/cpu/weight_view.h"

namespace deepinfer::model {

enum class LinearOut { Bf16, Fp32 };

// y[n, w.out] = x[n, w.in] · Wᵀ. xq is scratch (grows once). Quantized weights always give bf16.
void qat32_linear(const float* x, int64_t n, const cpu::WeightView& w, float* y, LinearOut out,
                  std::vector<float>& xq, cpu::ThreadPool* pool);

}  // namespace deepinfer::model
