// Regression (found by scripts/bad_inputs.py): `--lookup-cache DIR` ended in "error:
// std::bad_alloc" because a directory opens as a stream whose size reads as 2^63 - 1; a FIFO would
// block. Both are now refused by name; load_or_empty turns that into a warning.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "common/testing.h"
#include "specdec/error.h"
#include "specdec/lookup_cache.h"

namespace specdec {
namespace {

std::string load_error(const std::string& path) {
  try {
    LookupCache::load(path, 512, 0);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LookupCacheBadPaths, DirectoryIsRefusedByName) {
  const std::string dir = testing::temp_dir();
  const std::string msg = load_error(dir);
  EXPECT_NE(msg.find("'" + dir + "' is not a regular file"), std::string::npos) << msg;
  std::string warning;
  LookupCache::load_or_empty(dir, 512, 0, {}, &warning);
  EXPECT_NE(warning.find("is not a regular file"), std::string::npos) << warning;
}

TEST(LookupCacheBadPaths, FifoIsRefusedWithoutBlocking) {
  const std::string fifo = testing::temp_dir() + "/cache.fifo";
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(load_error(fifo).find("is not a regular file"), std::string::npos);
}

TEST(LookupCacheBadPaths, DevNullIsRefused) {
  EXPECT_NE(load_error("/dev/null").find("is not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace specdec
