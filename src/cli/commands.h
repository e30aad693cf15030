// cli/commands.h — subcommands of the `specdec` program register themselves here.
//
// Each src/cli/cmd_<name>.cpp defines a setup function that adds a CLI11 subcommand and its
// callback, and registers it with a file-scope SPECDEC_COMMAND(...). Callbacks throw
// specdec::Error for user errors; main() prints them and exits 1.
//
// `serve` is the exception: the HTTP server (src/server/) is a separate program, specdec-server,
// built next to specdec so that specdec does not link cpp-httplib/OpenSSL. `specdec serve ARGS`
// execs it with ARGS unchanged (cmd_serve.cpp).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
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

// Replaces this process with `<directory of this program>/specdec-server ARGS` (execv: same PID,
// streams, exit status). Returns only by throwing specdec::Error (naming the path and errno text)
// when the program cannot be run.
void exec_server(const std::vector<std::string>& args);

}  // namespace specdec::cli

#define SPECDEC_COMMAND(name, setup_fn) \
  static ::specdec::cli::CommandRegistrar specdec_command_registrar_##setup_fn(name, setup_fn)
