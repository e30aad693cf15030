// `specdec` and `specdec-server` are two programs: only the server links cpp-httplib, whose
// Debian build pulls in libssl and libcrypto (~3 MiB resident in every process that loads them).
// `specdec serve ARGS` execs the server next to it with ARGS unchanged.
#include <elf.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/cli_run.h"
#include "common/testing.h"

namespace specdec {
namespace {

using testing::cli_path;
using testing::run_cli;

// The DT_NEEDED entries (shared libraries the loader maps) of a 64-bit little-endian ELF file,
// read from its SHT_DYNAMIC section and the string table that section links to.
std::vector<std::string> elf_needed(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> needed;
  if (bytes.size() < sizeof(Elf64_Ehdr)) {
    ADD_FAILURE() << path << ": too small for an ELF header";
    return needed;
  }
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    ADD_FAILURE() << path << ": not a 64-bit little-endian ELF file";
    return needed;
  }
  auto section = [&](size_t i) {
    Elf64_Shdr sh{};
    const size_t at = eh.e_shoff + i * eh.e_shentsize;
    if (i < eh.e_shnum && at + sizeof sh <= bytes.size()) std::memcpy(&sh, bytes.data() + at, sizeof sh);
    return sh;
  };
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr dyn = section(i);
    if (dyn.sh_type != SHT_DYNAMIC) continue;
    const Elf64_Shdr str = section(dyn.sh_link);
    for (size_t at = dyn.sh_offset; at + sizeof(Elf64_Dyn) <= dyn.sh_offset + dyn.sh_size; at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn d;
      if (at + sizeof d > bytes.size()) break;
      std::memcpy(&d, bytes.data() + at, sizeof d);
      if (d.d_tag == DT_NULL) break;
      if (d.d_tag == DT_NEEDED && d.d_un.d_val < str.sh_size && str.sh_offset + str.sh_size <= bytes.size())
        needed.emplace_back(bytes.c_str() + str.sh_offset + d.d_un.d_val);
    }
  }
  return needed;
}

bool needs(const std::vector<std::string>& libs, const std::string& prefix) {
  for (const auto& lib : libs)
    if (lib.rfind(prefix, 0) == 0) return true;
  return false;
}

std::string server_path() { return (std::filesystem::path(cli_path()).parent_path() / "specdec-server").string(); }

std::string joined(const std::vector<std::string>& libs) {
  std::string out;
  for (const auto& lib : libs) out += lib + " ";
  return out;
}

TEST(CliServerSplit, SpecdecDoesNotLinkHttplibOrOpenSsl) {
  SPECDEC_REQUIRE_CLI();
  const auto libs = elf_needed(cli_path());
  ASSERT_TRUE(needs(libs, "libc.so")) << "the ELF reader found no libc in " << cli_path() << ": " << joined(libs);
  for (const char* lib : {"libcpp-httplib", "libssl", "libcrypto", "libbrotli", "libz."})
    EXPECT_FALSE(needs(libs, lib)) << cli_path() << " links " << lib << " again (only specdec-server may): "
                                   << joined(libs);
}

TEST(CliServerSplit, TheServerProgramIsNextToSpecdecAndLinksHttplib) {
  SPECDEC_REQUIRE_CLI();
  ASSERT_TRUE(std::filesystem::exists(server_path())) << server_path();
  const auto libs = elf_needed(server_path());
  EXPECT_TRUE(needs(libs, "libcpp-httplib")) << joined(libs);
}

TEST(CliServerSplit, ServeHelpIsTheServersHelp) {
  SPECDEC_REQUIRE_CLI();
  auto r = run_cli("serve --help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* option : {"--port", "--parallel", "--chat-template", "--model-draft"})
    EXPECT_NE(r.out.find(option), std::string::npos) << option << " missing from:\n" << r.out;
}

TEST(CliServerSplit, ServeIsListedInSpecdecHelp) {
  SPECDEC_REQUIRE_CLI();
  auto r = run_cli("--help");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("OpenAI-compatible HTTP server with speculative decoding"), std::string::npos) << r.out;
}

TEST(CliServerSplit, ServeErrorsAreTheServers) {
  SPECDEC_REQUIRE_CLI();
  auto r = run_cli("serve -m model.gguf --no-such-option");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("not expected"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--no-such-option"), std::string::npos) << r.err;
}

TEST(CliServerSplit, ServeForwardsMdAsTheDraftModel) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  // `-md` reaches the server, which reads it as --model-draft: a missing draft file, exit 1.
  const std::string draft = testing::temp_dir() + "/no-such-draft.gguf";
  auto r = run_cli("serve -m '" + model + "' -md '" + draft + "' --port 0");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("no-such-draft.gguf"), std::string::npos) << r.err;
}

TEST(CliServerSplit, MissingServerProgramIsAnErrorNamingThePath) {
  SPECDEC_REQUIRE_CLI();
  const auto dir = std::filesystem::path(testing::temp_dir()) / "lonely";
  std::filesystem::create_directories(dir);
  const auto copy = dir / "specdec";
  std::filesystem::copy_file(cli_path(), copy, std::filesystem::copy_options::overwrite_existing);
  const std::string err = testing::temp_dir() + "/lonely.err";
  const int status = std::system(("'" + copy.string() + "' serve --help >/dev/null 2>'" + err + "'").c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  std::ifstream in(err);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find((dir / "specdec-server").string()), std::string::npos) << text;
  EXPECT_NE(text.find("No such file or directory"), std::string::npos) << text;
}

}  // namespace
}  // namespace specdec
