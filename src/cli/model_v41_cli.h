// `deepinfer score` / `generate` on a DeepSeek V4.1 folder (config.json architectures
// ["DeepseekV41ForCausalLM"] or model_type deepseek_v41): the same JSON contracts as the V4 path in
// cmd_model.cpp, run by model::v41::V41Model on the CPU or, with device "cuda" (default: cuda when
// the build has CUDA and a GPU answers), by cuda::CudaV41Model on slot 0. Environment
// DEEPINFER_CUDA_EMULATE=1 (tests) runs the CUDA kernel bodies on the host. Failures print the
// error object and throw CliExit{1}.
#pragma once

#include <span>
#include <string>

#include "common/json.h"

namespace deepinfer::cli {

// True when dir/config.json names the V4.1 architecture (unreadable config: false).
bool is_v41_model_dir(const std::string& dir);

// `ids` and `rows` come validated from the score request (cmd_model.cpp reads it once for both).
void run_v41_score(const std::string& dir, int threads, const std::string& device,
                   std::span<const int32_t> ids, std::span<const int64_t> rows);
void run_v41_generate(const std::string& dir, int threads, const std::string& device,
                      const JsonObject& request);

}  // namespace deepinfer::cli
