// The device sampling kernel (sampling.h says what it computes).
#pragma once

#include <cstdint>

#include "backend/cuda/exec.cuh"
#include "backend/cuda/sampling.h"

namespace deepinfer::cuda {

// tokens[r] for rows r of logits [rows, V] under specs[r] (device arrays); work: rows × V floats
// of scratch, which may be logits itself (each value is read before it is rewritten). A block per
// row; no host synchronisation.
void sample_rows(Exec& e, const float* logits, int64_t rows, int64_t V, const SampleSpec* specs,
                 float* work, int32_t* tokens);

}  // namespace deepinfer::cuda
