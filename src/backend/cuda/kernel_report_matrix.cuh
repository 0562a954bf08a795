// The kernel reports' random weight matrices in the shipped formats (kernel_report.cu).
#pragma once

#include <cstdint>
#include <random>

#include "backend/cuda/exec.cuh"
#include "backend/cuda/formats.cuh"

namespace deepinfer::cuda {

struct Matrix {
  DeviceArray<uint8_t> data, scale;
  DevWeight w;
};

// Random codes (no NaN), bf16 of moderate magnitude, FP8 128×128 / FP4 ×32 UE8M0 block scales
// near 1, f32 N(0, 0.05).
Matrix random_matrix(Exec& e, DevFormat f, int64_t out, int64_t in, std::mt19937& rng);

}  // namespace deepinfer::cuda
