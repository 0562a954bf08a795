// Uploading one weight matrix as shipped (bf16/fp32, FP8 e4m3 with block scales, FP4 e2m1 with
// per-32 scales): the packed bytes and scales go to device memory unchanged; shared by the V4 and
// V4.1 models.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/weight_view.h"
#include "backend/cuda/exec.cuh"
#include "backend/cuda/formats.cuh"

namespace deepinfer::cuda {

// The device copy of w; its buffers are appended to blobs and their size added to weight_bytes.
DevWeight upload_weight(Exec& exec, const cpu::WeightView& w,
                        std::vector<DeviceArray<uint8_t>>& blobs, int64_t& weight_bytes);

}  // namespace deepinfer::cuda
