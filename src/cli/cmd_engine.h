// `deepinfer generate --batch FILE.jsonl`: offline batch generation through the engine
// (continuous batching, prefix cache). The `generate` subcommand attaches these options and
// calls run_generate_batch() when --batch is given.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace deepinfer::cli {

struct BatchFlags {
  std::string batch_file;       // one request per line; "-" reads stdin
  std::string kv_cache_memory;  // bytes, with an optional K/M/G suffix; empty: --kv-blocks
  int32_t kv_blocks = 4096;
  int32_t block_size = 16;
  int32_t max_num_seqs = 64;
  int32_t max_batched_tokens = 2048;
  int32_t max_model_len = 65536;
  bool no_prefix_cache = false;
};

void add_batch_options(CLI::App& generate, BatchFlags& flags);

// Reads the JSONL file, runs every line through one engine and prints one JSON result per input
// line, in input order: {"ids":[...],"text":...,"finish_reason":...,"usage":{...}} or
// {"error":{...}} for a line that could not run. Progress on stderr. Throws CliExit on failure.
// `device`: cpu, cuda or auto/"" (engine_device.h); on cuda --kv-blocks is unused (the blocks
// cover the device slots, sized for the longest request and --kv-cache-memory when given).
void run_generate_batch(const std::string& model_dir, int threads, const BatchFlags& flags,
                        const std::string& device = "cpu");

}  // namespace deepinfer::cli
