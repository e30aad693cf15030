// The thread hand-off probe (specdec/handoff_latency.h): one positive, finite latency per worker,
// none for a pool of one thread, bad arguments rejected. (No bound on the value itself: speeds
// are benchmarks, not tests; on a loaded machine a hand-off can wait for a timeslice.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "specdec/error.h"
#include "specdec/handoff_latency.h"
#include "specdec/thread_pool.h"

namespace specdec {
namespace {

TEST(HandoffLatency, OneLatencyPerWorker) {
  for (int n_threads : {2, 3}) {
    ThreadPool pool(n_threads);
    // Few round trips: under ctest -j2 the partner thread may have to wait for a timeslice.
    const HandoffLatency h = measure_handoff_latency(pool, 50, 1);
    ASSERT_EQ(h.worker_ns.size(), static_cast<size_t>(n_threads - 1));
    for (double ns : h.worker_ns) EXPECT_TRUE(std::isfinite(ns) && ns > 0.0) << ns;
    EXPECT_EQ(h.max_ns(), *std::max_element(h.worker_ns.begin(), h.worker_ns.end()));
    // The pool still runs ordinary calls afterwards (the probe leaves no worker behind).
    int sum = 0;
    pool.parallel_for(4, [&](int task, int) { __atomic_fetch_add(&sum, task, __ATOMIC_RELAXED); });
    EXPECT_EQ(sum, 0 + 1 + 2 + 3);
  }
}

TEST(HandoffLatency, NothingToMeasureOnOneThread) {
  ThreadPool pool(1);
  const HandoffLatency h = measure_handoff_latency(pool);
  EXPECT_TRUE(h.worker_ns.empty());
  EXPECT_EQ(h.max_ns(), 0.0);
}

TEST(HandoffLatency, RejectsBadArgumentsNamingThem) {
  ThreadPool pool(2);
  try {
    measure_handoff_latency(pool, 0, 1);
    ADD_FAILURE() << "no error for 0 round trips";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("round trips 0"), std::string::npos) << e.what();
  }
  try {
    measure_handoff_latency(pool, 10, 0);
    ADD_FAILURE() << "no error for 0 passes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("passes 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace specdec
