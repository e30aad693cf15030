// The `specdec` program: subcommands registered by src/cli/cmd_*.cpp. `specdec serve ARGS` runs
// the HTTP server, a separate program (build/specdec-server, src/server/) that this one execs with
// ARGS unchanged, so that specdec itself does not load cpp-httplib, libssl and libcrypto.
#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "specdec/error.h"

namespace specdec::cli {

std::vector<CommandEntry>& command_registry() {
  static std::vector<CommandEntry> registry;
  return registry;
}

}  // namespace specdec::cli

int main(int argc, char** argv) {
  // `serve`: before any parsing, so the server gets exactly the words it was given (its own
  // --help, `-md`, `--`); exec_server returns only when specdec-server cannot be run.
  if (argc >= 2 && std::string_view(argv[1]) == "serve") {
    try {
      specdec::cli::exec_server(std::vector<std::string>(argv + 2, argv + argc));
    } catch (const specdec::Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
    }
    return 1;
  }
  CLI::App app{"specdec: speculative decoding inference engine for GGUF models"};
  app.require_subcommand(1);
  auto& registry = specdec::cli::command_registry();
  std::sort(registry.begin(), registry.end(),
            [](const auto& a, const auto& b) { return std::string(a.name) < b.name; });
  for (auto& entry : registry) entry.setup(app);
  return specdec::cli::parse_and_run(app, argc, argv);
}
