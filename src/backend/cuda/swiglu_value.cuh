// One value of the routed experts' SwiGLU and its FP8 copy, shared by the SwiGLU launch
// (moe_fast.cu) and the w2 launch that stages its inputs itself (gemv_mma_step.cuh), so that both
// give the same bits.
#pragma once

#include "backend/cuda/formats.cuh"

namespace deepinfer::cuda {

// silu(min(g, limit)) · clamp(u, ±limit) (no clamp where limit ≤ 0), times the slot's routing
// weight where given, bf16-rounded in the official numerics.
__device__ __forceinline__ float swiglu_value(float g, float u, float limit, const float* row_w,
                                              bool official) {
  if (limit > 0) {
    g = fminf(g, limit);
    u = fminf(fmaxf(u, -limit), limit);
  }
  float x = g / (1.0f + expf(-g)) * u;
  if (row_w) x *= *row_w;
  return official ? bf16r(x) : x;
}

// v's FP8 copy at its 128-value block's scale s = fp8_act_scale(block amax).
__device__ __forceinline__ float fp8_act_value(float v, float s) {
  return bf16r(round_e4m3(v / s) * s);
}

}  // namespace deepinfer::cuda
