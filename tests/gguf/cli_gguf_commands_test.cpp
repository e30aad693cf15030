// `specdec inspect` and `specdec convert-llama2c`, run as the real program.
// The program is found through SPECDEC_CLI (set by ctest) or the build folder; the tests skip
// when it has not been built.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/testing.h"

namespace specdec {
namespace {

std::string cli_path() {
  if (const char* env = std::getenv("SPECDEC_CLI"); env && *env) return env;
  const std::string built = (std::filesystem::path(SPECDEC_BINARY_DIR) / "specdec").string();
  return std::filesystem::exists(built) ? built : std::string();
}

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

RunResult run(const std::string& args) {
  RunResult r;
  const std::string cmd = "'" + cli_path() + "' " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

#define REQUIRE_CLI()                                                            \
  if (cli_path().empty()) GTEST_SKIP() << "specdec program not built (set SPECDEC_CLI)"

TEST(CliGguf, InspectPrintsMetadataAndTensors) {
  REQUIRE_CLI();
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  const RunResult r = run("inspect '" + model + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* part : {"GGUF version 3, alignment 32, 19 metadata entries, 48 tensors",
                           "llama.context_length", "U32", "128", "ARRAY of STRING",
                           "\"<unk>\", \"<s>\"", "(512 items)", "token_embd.weight",
                           "[64, 512]", "blk.4.ffn_norm.weight", "1170944",
                           "total: 48 tensors, 292800 parameters, 1171200 bytes"})
    EXPECT_NE(r.output.find(part), std::string::npos) << "missing '" << part << "' in:\n" << r.output;
}

TEST(CliGguf, InspectReportsBadFiles) {
  REQUIRE_CLI();
  const std::string path = testing::temp_dir() + "/not_a_model.gguf";
  std::ofstream(path) << "hello world, definitely not gguf";
  RunResult r = run("inspect '" + path + "'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("error:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bad magic"), std::string::npos) << r.output;
  r = run("inspect '" + testing::temp_dir() + "/absent.gguf'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("absent.gguf"), std::string::npos) << r.output;
}

TEST(CliGguf, ConvertLlama2cReproducesTheSharedGguf) {
  REQUIRE_CLI();
  SPECDEC_FIXTURE(bin, "models/stories260K.bin");
  SPECDEC_FIXTURE(tok, "models/tok512.bin");
  SPECDEC_FIXTURE(ref, "models/stories260K.gguf");
  const std::string out = testing::temp_dir() + "/cli_converted.gguf";
  RunResult r = run("convert-llama2c --model '" + bin + "' --tokenizer '" + tok + "' -o '" + out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("context 128"), std::string::npos) << r.output;
  EXPECT_TRUE(testing::read_bytes(out) == testing::read_bytes(ref)) << "converted file differs from " << ref;

  r = run("convert-llama2c --model '" + bin + "' --tokenizer '" + tok + "' -o '" + out + "' --ctx 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("context 512"), std::string::npos) << r.output;

  r = run("convert-llama2c --model '" + tok + "' --tokenizer '" + tok + "' -o '" + out + ".bad'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("absurd header"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out + ".bad"));
}

}  // namespace
}  // namespace specdec
