// Random-weight V4 checkpoints in the published layout (config.json + model.safetensors) for
// benchmarks: bf16 matrices, or the shipped formats (FP8 e4m3 with 128×128 UE8M0 block scales,
// FP4 e2m1 routed experts with per-32 UE8M0 scales). The bytes depend only on the config, the
// format and the seed (never on the thread count); the file is filled in parallel through a mmap.
#pragma once

#include <cstdint>
#include <string>

#include "common/json.h"
#include "common/result.h"

namespace deepinfer::model {

enum class SyntheticFormat { Bf16, Fp8 };

// "bf16" / "fp8" (FP8 linears + FP4 experts, as shipped).
Result<SyntheticFormat> parse_synthetic_format(const std::string& name);
const char* to_string(SyntheticFormat format);

// config.json (published keys) of the first `layers` blocks of the V4-Flash release: hidden 4096,
// 64 heads × 512, q/o rank 1024, 8 output groups, window 128, CSA (ratio 4, indexer 64 × 128,
// top-512) / HCA (ratio 128) in the release order, 256 experts top-6 × 2048, 3 hash layers,
// hc 4, vocab 129280. No MTP block. Fp8 adds the release's quantization_config.
Json v4_flash_slice_config(int layers, SyntheticFormat format);
// The same layer pattern and formats at toy dims (hidden 256, vocab 1024, 16 experts × 128):
// a checkpoint of a few MB for tests and CPU smoke runs.
Json tiny_slice_config(int layers, SyntheticFormat format);

struct SyntheticOptions {
  uint64_t seed = 1;
  int threads = 1;
};

struct SyntheticResult {
  int64_t tensors = 0;
  int64_t bytes = 0;  // model.safetensors size
};

// Writes dir/config.json and dir/model.safetensors (dir is created). Every tensor the loader
// expects for `config` is present, with published names, shapes and dtypes.
Result<SyntheticResult> write_synthetic_checkpoint(const Json& config, const std::string& dir,
                                                   SyntheticFormat format,
                                                   const SyntheticOptions& options = {});

}  // namespace deepinfer::model
