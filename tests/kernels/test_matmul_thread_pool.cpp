// The thread pool behind matmul: every task runs exactly once on its static thread
// (task % n_threads), across many back-to-back calls (workers spinning) and calls separated by
// pauses longer than the spin time (workers asleep), for several pool sizes.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "specdec/thread_pool.h"

namespace specdec {
namespace {

void check_calls(ThreadPool& pool, int n_calls, std::chrono::microseconds pause) {
  for (int call = 0; call < n_calls; ++call) {
    const int n_tasks = 1 + call % 7;
    std::vector<std::atomic<int>> runs(static_cast<size_t>(n_tasks));   // (n_tasks) times run
    std::vector<int> thread_of(static_cast<size_t>(n_tasks), -1);       // (n_tasks)
    pool.parallel_for(n_tasks, [&](int task, int thread) {
      runs[static_cast<size_t>(task)].fetch_add(1);
      thread_of[static_cast<size_t>(task)] = thread;
    });
    for (int t = 0; t < n_tasks; ++t) {
      ASSERT_EQ(1, runs[static_cast<size_t>(t)].load()) << "call " << call << " task " << t;
      ASSERT_EQ(t % pool.size(), thread_of[static_cast<size_t>(t)]) << "call " << call << " task " << t;
    }
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
  }
}

TEST(MatmulThreadPool, EveryTaskOnceOnItsStaticThread) {
  for (int n_threads : {1, 2, 3, 4}) {
    ThreadPool pool(n_threads);
    check_calls(pool, 300, std::chrono::microseconds(0));   // back to back: workers spinning
    check_calls(pool, 20, std::chrono::microseconds(2000));  // workers fall asleep in between
  }
}

TEST(MatmulThreadPool, DestroysWhileWorkersSpinOrSleep) {
  for (int pause_us : {0, 500, 3000}) {
    ThreadPool pool(3);
    std::atomic<int> total{0};
    pool.parallel_for(3, [&](int, int) { total.fetch_add(1); });
    if (pause_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
    EXPECT_EQ(3, total.load());
  }  // the destructor must wake and join the workers in every state
}

}  // namespace
}  // namespace specdec
