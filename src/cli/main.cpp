// The `specdec` program: subcommands registered by src/cli/cmd_*.cpp and src/server/.
#include <algorithm>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "specdec/error.h"

namespace specdec::cli {

std::vector<CommandEntry>& command_registry() {
  static std::vector<CommandEntry> registry;
  return registry;
}

}  // namespace specdec::cli

int main(int argc, char** argv) {
  CLI::App app{"specdec: speculative decoding inference engine for GGUF models"};
  app.require_subcommand(1);
  auto& registry = specdec::cli::command_registry();
  std::sort(registry.begin(), registry.end(),
            [](const auto& a, const auto& b) { return std::string(a.name) < b.name; });
  for (auto& entry : registry) entry.setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const specdec::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
