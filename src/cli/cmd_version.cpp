// `deepinfer info`: what this build contains (backends, CPU features).
#include <iostream>

#include "cli/command.h"

namespace {

void setup(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show the build configuration (backends, CPU features)");
  cmd->callback([] {
#ifdef DEEPINFER_HAVE_CUDA
    const bool cuda = true;
#else
    const bool cuda = false;
#endif
    std::cout << "{\"version\":\"0.1.0\",\"cuda_backend\":" << (cuda ? "true" : "false")
              << ",\"avx512f\":" << (__builtin_cpu_supports("avx512f") ? "true" : "false")
              << "}\n";
  });
}

DEEPINFER_COMMAND(setup);

}  // namespace
