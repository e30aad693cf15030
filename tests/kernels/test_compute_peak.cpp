// The compute-peak probe runs on every ISA: positive finite rates and named instructions on the
// SIMD paths, nothing on the scalar path; bad arguments are rejected. (No timing assertion
// beyond "positive": speeds are benchmarks, not tests.)
#include <gtest/gtest.h>

#include <cmath>

#include "specdec/compute_peak.h"
#include "specdec/cpu.h"
#include "specdec/error.h"
#include "specdec/thread_pool.h"

namespace specdec {
namespace {

TEST(ComputePeak, MeasuresPositiveFiniteOnEverySimdIsa) {
  ThreadPool pool(2);
  const Isa saved = active_isa();
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    const ComputePeak peak = measure_compute_peak(pool, 1, 0.002);
    if (isa == Isa::Scalar) {
      EXPECT_EQ(peak.int8_gmacs, 0.0);
      EXPECT_EQ(peak.f32_gmacs, 0.0);
      EXPECT_TRUE(peak.int8_instruction.empty());
      continue;
    }
    EXPECT_TRUE(std::isfinite(peak.int8_gmacs) && peak.int8_gmacs > 0.0) << isa_name(isa) << ": " << peak.int8_gmacs;
    EXPECT_TRUE(std::isfinite(peak.f32_gmacs) && peak.f32_gmacs > 0.0) << isa_name(isa) << ": " << peak.f32_gmacs;
    EXPECT_FALSE(peak.int8_instruction.empty());
    EXPECT_FALSE(peak.f32_instruction.empty());
  }
  set_active_isa(saved);
}

TEST(ComputePeak, RejectsBadArguments) {
  ThreadPool pool(1);
  EXPECT_THROW(measure_compute_peak(pool, 0, 0.01), Error);
  EXPECT_THROW(measure_compute_peak(pool, 1, 0.0), Error);
  EXPECT_THROW(measure_compute_peak(pool, 1, 11.0), Error);
}

}  // namespace
}  // namespace specdec
