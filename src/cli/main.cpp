// The `specdec` program: subcommands registered by src/cli/cmd_*.cpp and src/server/.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

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
  // llama.cpp spells the draft model option `-md`; CLI11 allows one-letter short options only.
  std::vector<std::string> args(argv + 1, argv + argc);
  for (auto& a : args)
    if (a == "-md") a = "--model-draft";
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse order
  try {
    app.parse(args);
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
