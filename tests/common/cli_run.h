// tests/common/cli_run.h — runs the real `specdec` program (found through SPECDEC_CLI, set by
// ctest, or the build folder) and captures its output.
#pragma once

#include <string>

namespace specdec::testing {

std::string cli_path();  // "" when the program has not been built

struct CliResult {
  int exit_code = -1;
  std::string out;   // stdout
  std::string err;   // stderr
};

// Runs `specdec <args>` through the shell (args are shell words; quote paths yourself).
CliResult run_cli(const std::string& args);

}  // namespace specdec::testing

#define SPECDEC_REQUIRE_CLI()                                                       \
  if (::specdec::testing::cli_path().empty()) GTEST_SKIP() << "specdec program not built (set SPECDEC_CLI)"
