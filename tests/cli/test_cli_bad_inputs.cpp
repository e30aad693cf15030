// Bad inputs at the command line that scripts/bad_inputs.py found accepted or crashing; each now
// ends in "error: ..." naming the offending path, with exit status 1.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "common/cli_run.h"
#include "common/testing.h"

namespace specdec {
namespace {

using testing::run_cli;

TEST(CliBadInputs, PromptFileThatIsADirectory) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  const std::string dir = testing::temp_dir();
  auto r = run_cli("generate -m '" + model + "' -f '" + dir + "' -n 4");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("prompt file '" + dir + "' is a directory"), std::string::npos) << r.err;
}

TEST(CliBadInputs, LookupCacheThatIsADirectoryIsAWarningNotBadAlloc) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  const std::string dir = testing::temp_dir() + "/cache-dir";
  std::filesystem::create_directories(dir);
  auto r = run_cli("generate -m '" + model + "' -p 'Once upon a time' -n 4 --spec lookup --lookup-cache '" + dir + "'");
  EXPECT_EQ(r.err.find("bad_alloc"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'" + dir + "' is not a regular file"), std::string::npos) << r.err;
}

TEST(CliBadInputs, ModelThatIsAFifoDoesNotHang) {
  SPECDEC_REQUIRE_CLI();
  const std::string fifo = testing::temp_dir() + "/model.fifo";
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto r = run_cli("inspect '" + fifo + "'");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("is a pipe, not a regular file"), std::string::npos) << r.err;
}

TEST(CliBadInputs, KvCacheLargerThanTheMemoryIsRefusedWithWhatItNeeds) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  // The child inherits the variable: no memory is available as far as it knows.
  ::setenv("SPECDEC_MEMORY_LIMIT_MB", "0", 1);
  auto c = run_cli("generate -m '" + model + "' -p hi -n 1");
  ::unsetenv("SPECDEC_MEMORY_LIMIT_MB");
  EXPECT_EQ(c.exit_code, 1) << c.err;
  EXPECT_NE(c.err.find("KV cache: a context of 128 tokens needs 160.00 KiB"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("--ctx-size"), std::string::npos) << c.err;
}

}  // namespace
}  // namespace specdec
