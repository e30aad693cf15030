// tests/common/testing.h — helpers shared by the test suite.
//
// Fixtures: tests that need ../shared/fixtures call SPECDEC_FIXTURE(var, "models/x.gguf"):
// when the file is absent the test is SKIPPED with a message naming it, unless the environment
// sets SPECDEC_REQUIRE_FIXTURES=1 (CI), where it FAILS. SPECDEC_FIXTURES overrides the folder.
// Seeds: test_seed() returns SPECDEC_TEST_SEED when set, else a fresh seed; it prints the seed
// so a failing run can be repeated.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace specdec::testing {

// Folder of the shared fixtures (may not exist).
std::string fixtures_dir();
// Full path of a fixture, or "" when missing.
std::string find_fixture(const std::string& relative);
bool fixtures_required();
// Fresh per run unless SPECDEC_TEST_SEED is set; printed to stdout with `what`.
uint64_t test_seed(const char* what = "");
// A temporary directory unique to this process (created on first use).
std::string temp_dir();
// Under ASan/UBSan/TSan trial counts are scaled down by this factor (1 otherwise).
int sanitizer_slowdown();
// Reads a whole file of float32 values (Error when absent).
std::vector<float> read_f32_file(const std::string& path);

}  // namespace specdec::testing

#define SPECDEC_FIXTURE(var, relative)                                                        \
  std::string var = ::specdec::testing::find_fixture(relative);                               \
  if (var.empty()) {                                                                           \
    if (::specdec::testing::fixtures_required()) {                                             \
      FAIL() << "fixture " << (relative) << " not found in " << ::specdec::testing::fixtures_dir() \
             << " and SPECDEC_REQUIRE_FIXTURES=1";                                             \
    } else {                                                                                   \
      GTEST_SKIP() << "fixture " << (relative) << " not found in "                             \
                   << ::specdec::testing::fixtures_dir() << " (../shared absent): skipped";    \
    }                                                                                          \
  }
