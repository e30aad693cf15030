// cli/commands.h — subcommands of the `specdec` program register themselves here.
//
// Each src/cli/cmd_<name>.cpp (and src/server/) defines a setup function that adds a CLI11
// subcommand and its callback, and registers it with a file-scope SPECDEC_COMMAND(...).
// Callbacks throw specdec::Error for user errors; main() prints them and exits 1.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <vector>

namespace specdec::cli {

struct CommandEntry {
  const char* name;
  std::function<void(CLI::App& app)> setup;  // adds the subcommand to app
};

std::vector<CommandEntry>& command_registry();

struct CommandRegistrar {
  CommandRegistrar(const char* name, std::function<void(CLI::App&)> setup) {
    command_registry().push_back({name, std::move(setup)});
  }
};

}  // namespace specdec::cli

#define SPECDEC_COMMAND(name, setup_fn) \
  static ::specdec::cli::CommandRegistrar specdec_command_registrar_##setup_fn(name, setup_fn)
