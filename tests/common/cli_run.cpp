#include "common/cli_run.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/testing.h"

namespace specdec::testing {

std::string cli_path() {
  if (const char* env = std::getenv("SPECDEC_CLI"); env && *env) return env;
  const std::string built = (std::filesystem::path(SPECDEC_BINARY_DIR) / "specdec").string();
  return std::filesystem::exists(built) ? built : std::string();
}

CliResult run_cli(const std::string& args) {
  static int counter = 0;
  const std::string base = temp_dir() + "/cli-" + std::to_string(counter++);
  const std::string cmd = "'" + cli_path() + "' " + args + " >'" + base + ".out' 2>'" + base + ".err' </dev/null";
  CliResult r;
  const int status = std::system(cmd.c_str());
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto slurp = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  r.out = slurp(base + ".out");
  r.err = slurp(base + ".err");
  return r;
}

}  // namespace specdec::testing
