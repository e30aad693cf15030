// `specdec tokenize` end to end (runs the built CLI named by $SPECDEC_CLI, set by ctest).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/testing.h"

namespace specdec {
namespace {

std::string run(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  pclose(pipe);
  return out;
}

TEST(CliTokenize, PrintsIdsAndPieces) {
  const char* cli = std::getenv("SPECDEC_CLI");
  if (cli == nullptr) GTEST_SKIP() << "SPECDEC_CLI not set (run through ctest)";
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  const std::string base = std::string(cli) + " tokenize -m '" + model + "' -p 'Once upon a time'";
  EXPECT_EQ(run(base + " --ids"), "[1, 403, 407, 261, 378]\n");
  EXPECT_EQ(run(base + " --ids --no-bos"), "[403, 407, 261, 378]\n");
  const std::string listing = run(base);
  EXPECT_NE(listing.find("     1 '<s>'\n"), std::string::npos) << listing;
  EXPECT_NE(listing.find("   403 ' Once'\n"), std::string::npos) << listing;
  const std::string error = run(std::string(cli) + " tokenize -m /nonexistent.gguf -p x 2>&1");
  EXPECT_NE(error.find("/nonexistent.gguf"), std::string::npos) << "errors name the file: " << error;
}

}  // namespace
}  // namespace specdec
