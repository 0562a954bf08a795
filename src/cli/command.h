// Subcommand registry of the deepinfer CLI. Each cmd_*.cpp registers its subcommands with
// DEEPINFER_COMMAND(setup); setup(app) adds a CLI11 subcommand and its callback. Callbacks
// report failure by throwing CliExit{code} after printing their own message.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

namespace deepinfer::cli {

struct CliExit {
  int code;
};

using CommandSetup = std::function<void(CLI::App& app)>;

std::vector<CommandSetup>& command_registry();

// The `recipe` parent subcommand (render, stream, complete, encode hang below it).
CLI::App& recipe_command(CLI::App& app);

struct CommandRegistrar {
  explicit CommandRegistrar(CommandSetup setup) { command_registry().push_back(std::move(setup)); }
};

}  // namespace deepinfer::cli

#define DEEPINFER_CONCAT_INNER(a, b) a##b
#define DEEPINFER_CONCAT(a, b) DEEPINFER_CONCAT_INNER(a, b)
#define DEEPINFER_COMMAND(setup) \
  static ::deepinfer::cli::CommandRegistrar DEEPINFER_CONCAT(deepinfer_command_, __LINE__)(setup)
