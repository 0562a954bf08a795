// The activation roundings of DeepSeek V4's official numerics, on fp32 buffers holding the values:
// bf16 rounding (RNE), FP8 e4m3 block quantization with UE8M0 scales (act_quant), FP4 e2m1 block
// quantization (fp4_act_quant), and the Walsh–Hadamard rotation of the indexer. Bit-exact with the
// official kernels' documented semantics; no allocation.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace deepinfer::cpu {

// float → nearest bf16 (ties to even) as a float; NaN stays NaN.
inline float round_bf16(float x) {
  uint32_t b = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return x;
  b += 0x7fffu + ((b >> 16) & 1u);
  return std::bit_cast<float>(b & 0xffff0000u);
}
void round_bf16(float* x, int64_t n);

// One FP8 block scale: 2^ceil(log2(max(amax, 1e-4) · fp32(1/448))).
float fp8_block_scale(float amax);

// act_quant per block of `block` contiguous values (a shorter last block is its own block):
// codes[i] e4m3 of clamp(x/s, ±448), scales[b] the block's power-of-two scale. x is left unchanged.
void fp8_act_quant(const float* x, int64_t n, int block, uint8_t* codes, float* scales);

// In-place form: x ← bf16(e4m3(clamp(x/s, ±448)) · s) per block (the KV-QAT simulation, and the
// exact dequantized value of the FP8 GEMM input).
void fp8_act_quant_inplace(float* x, int64_t n, int block);

// fp4_act_quant in place, blocks of `block` (32): s = 2^ceil(log2(max(amax, 6·2^-126) ·
// fp32(1/6))), x ← bf16(e2m1(clamp(x/s, ±6)) · s).
void fp4_act_quant_inplace(float* x, int64_t n, int block);

// Hadamard rotation of each row of `dim` values (dim a power of two), Sylvester order,
// summed exactly, rounded once to fp32, times fp32(dim^-1/2), then rounded to bf16.
void hadamard_rotate_rows(float* x, int64_t rows, int dim);

}  // namespace deepinfer::cpu
