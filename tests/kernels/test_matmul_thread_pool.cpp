// The thread pool behind matmul: every task runs exactly once (on its static thread,
// task % n_threads, under Schedule::kStatic; on some thread of the pool under kDynamic), across
// many back-to-back calls (workers spinning), calls separated by pauses longer than the spin
// time (workers asleep) and alternating schedules, for several pool sizes; a blocked worker does
// not hold up tasks it has not claimed; task_count is the documented pure function.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "specdec/thread_pool.h"

namespace specdec {
namespace {

using Schedule = ThreadPool::Schedule;

void check_calls(ThreadPool& pool, int n_calls, std::chrono::microseconds pause) {
  for (int call = 0; call < n_calls; ++call) {
    const int n_tasks = 1 + call % 7;
    const Schedule schedule = call % 3 == 2 ? Schedule::kStatic : Schedule::kDynamic;
    std::vector<std::atomic<int>> runs(static_cast<size_t>(n_tasks));   // (n_tasks) times run
    std::vector<int> thread_of(static_cast<size_t>(n_tasks), -1);       // (n_tasks)
    pool.parallel_for(n_tasks, [&](int task, int thread) {
      runs[static_cast<size_t>(task)].fetch_add(1);
      thread_of[static_cast<size_t>(task)] = thread;
    }, schedule);
    for (int t = 0; t < n_tasks; ++t) {
      ASSERT_EQ(1, runs[static_cast<size_t>(t)].load()) << "call " << call << " task " << t;
      ASSERT_GE(thread_of[static_cast<size_t>(t)], 0) << "call " << call << " task " << t;
      ASSERT_LT(thread_of[static_cast<size_t>(t)], pool.size()) << "call " << call << " task " << t;
      if (schedule == Schedule::kStatic) {
        ASSERT_EQ(t % pool.size(), thread_of[static_cast<size_t>(t)]) << "call " << call << " task " << t;
      }
    }
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
  }
}

TEST(MatmulThreadPool, EveryTaskOnceStaticOnItsThread) {
  for (int n_threads : {1, 2, 3, 4}) {
    ThreadPool pool(n_threads);
    check_calls(pool, 300, std::chrono::microseconds(0));   // back to back: workers spinning
    check_calls(pool, 12, std::chrono::microseconds(1000));  // workers fall asleep in between
  }
}

// Waits (sleeping) until done() or `limit` has passed; returns done().
template <typename Done>
bool wait_for(Done done, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::microseconds(50));
  return done();
}

// A worker stuck inside a task (as if descheduled) must not hold up the tasks it has not
// claimed: the caller runs them. The caller's first task waits until the worker has claimed
// one; the worker's task then waits until every other task has run. With a static split (or a
// caller that waited for the worker's share) that never happens and the test fails after 20 s
// instead of hanging.
TEST(MatmulThreadPool, CallerRunsTasksABlockedWorkerHasNotClaimed) {
  ThreadPool pool(2, std::chrono::milliseconds(0));  // no stall back-off: every call uses the worker
  constexpr int kTasks = 16;
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> n_run{0};
    std::atomic<bool> worker_started{false}, gave_up{false};
    std::vector<int> thread_of(kTasks, -1);  // (kTasks)
    pool.parallel_for(kTasks, [&](int task, int thread) {
      thread_of[static_cast<size_t>(task)] = thread;
      if (thread == 0 && task == 0 && !wait_for([&] { return worker_started.load(); })) gave_up.store(true);
      if (thread != 0) {
        worker_started.store(true);
        if (!wait_for([&] { return n_run.load() >= kTasks - 1 || gave_up.load(); })) gave_up.store(true);
      }
      n_run.fetch_add(1);
    });
    ASSERT_FALSE(gave_up.load()) << "round " << round << ": tasks waited for a blocked worker";
    ASSERT_EQ(kTasks, n_run.load());
    int on_worker = 0;
    for (int t : thread_of) on_worker += t != 0;
    EXPECT_EQ(1, on_worker) << "round " << round << ": the blocked worker ran other than its one task";
  }
}

// One dynamic call of 2 tasks on a 2-thread pool. If the worker claims a task, it holds it until
// the caller has run its own task and then for `hold` more (a stall when that is long); the
// caller's task waits up to `patience` for the worker to start. Returns how many tasks ran on
// the worker: 1 when the call used it (the worker cannot claim the second task), 0 when the
// caller ran both.
int call_with_worker_holding(ThreadPool& pool, std::chrono::milliseconds hold,
                             std::chrono::milliseconds patience = std::chrono::seconds(20)) {
  std::atomic<bool> worker_started{false}, caller_done{false};
  std::atomic<int> on_worker{0};
  pool.parallel_for(2, [&](int, int thread) {
    if (thread == 0) {
      if (!caller_done.load()) wait_for([&] { return worker_started.load(); }, patience);
      caller_done.store(true);
    } else {
      worker_started.store(true);
      on_worker.fetch_add(1);
      wait_for([&] { return caller_done.load(); });
      std::this_thread::sleep_for(hold);
    }
  });
  return on_worker.load();
}

// After a stall (the caller waited 100 ms for a held task, far longer than its own share took)
// the next dynamic calls run on the caller alone until the back-off has passed; static calls
// still use every thread; without the back-off the worker is used again at once.
TEST(MatmulThreadPool, StallBacksOffToTheCallerThenRetriesTheWorkers) {
  using std::chrono::milliseconds;
  {
    ThreadPool pool(2, std::chrono::seconds(1000));
    ASSERT_EQ(1, call_with_worker_holding(pool, milliseconds(100)));  // the stall
    EXPECT_EQ(0, call_with_worker_holding(pool, milliseconds(0), milliseconds(200)));  // backed off
    std::vector<int> thread_of(2, -1);  // (2) static: each task on its own thread regardless
    pool.parallel_for(2, [&](int task, int thread) { thread_of[static_cast<size_t>(task)] = thread; },
                      ThreadPool::Schedule::kStatic);
    EXPECT_EQ(1, thread_of[1]);
  }
  {
    ThreadPool pool(2, milliseconds(1));
    ASSERT_EQ(1, call_with_worker_holding(pool, milliseconds(100)));  // the stall
    std::this_thread::sleep_for(milliseconds(50));                    // back-off (1 ms) over
    EXPECT_EQ(1, call_with_worker_holding(pool, milliseconds(0)));
  }
  {
    ThreadPool pool(2, milliseconds(0));
    ASSERT_EQ(1, call_with_worker_holding(pool, milliseconds(100)));
    EXPECT_EQ(1, call_with_worker_holding(pool, milliseconds(0)));
  }
}

// The back-off doubles when a stall comes right after the previous back-off ended (within
// 100 ms: an oversubscribed machine) and starts again from stall_backoff after a quiet spell (a
// lone hiccup). Back-offs of 200 ms and 400 ms; each check has >= 100 ms of margin.
TEST(MatmulThreadPool, BackOffDoublesOnlyWhileStallsRecur) {
  using std::chrono::milliseconds;
  {
    ThreadPool pool(2, milliseconds(200));
    ASSERT_EQ(1, call_with_worker_holding(pool, milliseconds(5)));  // a stall: 200 ms back-off
    EXPECT_EQ(0, call_with_worker_holding(pool, milliseconds(0), milliseconds(100)));  // takes 100 ms
    std::this_thread::sleep_for(milliseconds(110));
    ASSERT_EQ(1, call_with_worker_holding(pool, milliseconds(5)));  // right after: 400 ms
    std::this_thread::sleep_for(milliseconds(250));
    EXPECT_EQ(0, call_with_worker_holding(pool, milliseconds(0), milliseconds(100)));  // still backed off
    EXPECT_EQ(2, pool.stall_stats().n_stalls);
    EXPECT_EQ(2, pool.stall_stats().n_inline_calls);
  }
  {
    ThreadPool pool(2, milliseconds(200));
    ASSERT_EQ(1, call_with_worker_holding(pool, milliseconds(5)));  // 200 ms back-off
    std::this_thread::sleep_for(milliseconds(350));                   // ends, then 150 ms quiet
    ASSERT_EQ(1, call_with_worker_holding(pool, milliseconds(5)));  // a lone stall: 200 ms again
    std::this_thread::sleep_for(milliseconds(300));
    EXPECT_EQ(1, call_with_worker_holding(pool, milliseconds(0)));  // over: the worker again
    EXPECT_EQ(0, pool.stall_stats().n_inline_calls);
  }
}

TEST(MatmulThreadPool, TaskCountIsTheDocumentedFunction) {
  ThreadPool one(1), two(2), three(3);
  EXPECT_EQ(1, one.task_count(int64_t{1} << 40, 100));  // one thread: always inline
  EXPECT_EQ(1, two.task_count(199, 100));               // below the floor (2 x min task work)
  EXPECT_EQ(2, two.task_count(200, 100));
  EXPECT_EQ(5, two.task_count(599, 100));               // work / min task work
  EXPECT_EQ(ThreadPool::kTasksPerThread * 2, two.task_count(int64_t{1} << 40, 100));
  EXPECT_EQ(ThreadPool::kTasksPerThread * 3, three.task_count(int64_t{1} << 40, 100));
  EXPECT_EQ(1, two.task_count(1000, 0));                // no stated floor: inline
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
