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
#include <vector>

#include "specdec/rng.h"

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
// Planted-bug families show that a statistic has the power to detect a bug: that needs every
// trial, and a sanitizer build runs them ~8x slower (they were 60% of the ASan stage's test
// time, 195 of 320 s in test_spec). The power is a property of the statistic and the sampling
// code, not of the build (no fast-math, no FMA contraction at any optimisation level), and the
// Release build, which CI runs first, requires the detection. So a sanitizer build runs the
// planted bugs' code paths, for memory and UB errors, with planted_bug_trials(n) =
// n / sanitizer_slowdown() trials and does not require detection (detection_power_checked()).
bool detection_power_checked();
int planted_bug_trials(int n_trials);
// Reads a whole file of float32 values (Error when absent).
std::vector<float> read_f32_file(const std::string& path);
// A uniform value in [-1, 1).
inline float uniform_signed(Rng& rng) { return static_cast<float>(rng.uniform() * 2.0 - 1.0); }
// Reads / writes a whole file of bytes (Error naming the path when it cannot be opened).
std::vector<uint8_t> read_bytes(const std::string& path);
void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);

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
