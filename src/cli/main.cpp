// deepinfer: one binary, subcommands registered by the cmd_*.cpp files of this folder.
#include <iostream>

#include "cli/command.h"

namespace deepinfer::cli {

std::vector<CommandSetup>& command_registry() {
  static std::vector<CommandSetup> registry;
  return registry;
}

CLI::App& recipe_command(CLI::App& app) { return *app.get_subcommand("recipe"); }

}  // namespace deepinfer::cli

int main(int argc, char** argv) {
  CLI::App app{"deepinfer: DeepSeek V4 / V4.1 inference and serving"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "deepinfer 0.1.0");
  app.add_subcommand("recipe",
                     "Protocol layer: API request -> prompt, model output -> API events/responses")
      ->require_subcommand(1);
  for (auto& setup : deepinfer::cli::command_registry()) setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const deepinfer::cli::CliExit& e) {
    return e.code;
  } catch (const std::exception& e) {
    std::cerr << "deepinfer: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
