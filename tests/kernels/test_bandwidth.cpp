// The read-bandwidth probe runs on every ISA, returns a positive finite figure and rejects bad
// arguments. (No timing assertion beyond "positive": speeds are benchmarks, not tests.)
#include <gtest/gtest.h>

#include <cmath>

#include "specdec/bandwidth.h"
#include "specdec/cpu.h"
#include "specdec/error.h"
#include "specdec/thread_pool.h"

namespace specdec {
namespace {

TEST(Bandwidth, MeasuresPositiveFiniteOnEveryIsa) {
  ThreadPool pool(2);
  const Isa saved = active_isa();
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    const double gbs = measure_read_bandwidth_gbs(pool, size_t{8} << 20, 2);
    EXPECT_TRUE(std::isfinite(gbs) && gbs > 0.0) << isa_name(isa) << ": " << gbs;
  }
  set_active_isa(saved);
}

TEST(Bandwidth, RejectsBadArguments) {
  ThreadPool pool(1);
  EXPECT_THROW(measure_read_bandwidth_gbs(pool, 1000, 1), Error);
  EXPECT_THROW(measure_read_bandwidth_gbs(pool, size_t{2} << 20, 0), Error);
}

}  // namespace
}  // namespace specdec
