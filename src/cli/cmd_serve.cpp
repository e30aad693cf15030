// cli/cmd_serve.cpp — `specdec serve ARGS`: replaces this process (execv, same PID) with the
// server program `specdec-server ARGS` next to it (src/server/server_main.cpp). The HTTP server
// lives in its own binary so that `specdec` does not load cpp-httplib and the libraries it pulls
// in (libssl, libcrypto: ~3 MiB resident in every process, brotli, zlib).
//
// main() forwards before it parses anything, so every argument after `serve` reaches the server
// unchanged (`--help`, `-md`, `--` included); the subcommand registered here gives `specdec --help`
// its line and forwards whatever CLI11 collected should it ever be the one to see `serve`.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "specdec/error.h"

namespace specdec::cli {

namespace {

// The directory of this executable (/proc/self/exe) + "/specdec-server".
std::string server_path() {
  std::vector<char> buf(4096);
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) throw Error("cannot find the specdec-server program: readlink /proc/self/exe: " + std::string(std::strerror(errno)));
  std::string self(buf.data(), static_cast<size_t>(n));
  const size_t slash = self.rfind('/');
  return (slash == std::string::npos ? std::string(".") : self.substr(0, slash)) + "/specdec-server";
}

void setup_serve(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server with speculative decoding");
  cmd->prefix_command();  // the rest of the line belongs to the server...
  cmd->set_help_flag();   // ...--help included
  cmd->callback([cmd] { exec_server(cmd->remaining()); });
}

}  // namespace

void exec_server(const std::vector<std::string>& args) {
  const std::string path = server_path();
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(path.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv(path.c_str(), argv.data());
  throw Error("cannot run the server program '" + path + "': " + std::strerror(errno) +
              " (it is built next to specdec, by the specdec_server target)");
}

SPECDEC_COMMAND("serve", setup_serve);

}  // namespace specdec::cli
