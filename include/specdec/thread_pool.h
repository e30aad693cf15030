// specdec/thread_pool.h — the project's own fixed-size thread pool (no OpenMP: TSan-friendly).
//
// parallel_for(n_tasks, fn) runs fn(task, thread) for task in [0, n_tasks) on the calling thread
// plus the pool's workers, and returns when all are done. The tasks (what each one computes) are
// chosen by the caller from the problem size and size() only; the pool only decides which thread
// runs which task:
//   - Schedule::kDynamic (default): every thread, the caller included, claims the next unclaimed
//     task until none is left. A worker that is descheduled (an oversubscribed machine) or still
//     waking up therefore never stalls the call: the caller runs the tasks it has not claimed, and
//     waits only for tasks already running elsewhere.
//   - Schedule::kStatic: task i runs on thread i % size(), and the call waits for every thread.
//     For work that must run on distinct threads at once (the bandwidth probe, first touch).
// Kernels parallelise over independent outputs only (columns, heads, rows), never by splitting a
// reduction, so results do not depend on the thread count or on which thread ran a task.
//
// Waiting: a thread that waits (a worker for the next call, the caller for running tasks) spins
// with `pause` for a few tens of microseconds plus up to 200 µs more, as long as its own work
// in the call took (the rest of the call should take no longer), and then blocks in the kernel
// (futex), so an oversubscribed machine does not spend its timeslices spinning or yielding.
//
// Stall back-off (kDynamic only): a worker descheduled in the middle of a task still holds up
// the call until the kernel runs it again (often milliseconds on an oversubscribed machine).
// When the caller has waited for a running task much longer than its own share of the call took
// (a stall), the pool runs the following dynamic calls on the caller alone for a back-off time,
// then tries the workers again. The back-off is stall_backoff, doubled (up to kMaxBackoffFactor
// times) while each stall comes within kStallRecurrence of the previous back-off's end: an
// oversubscribed machine, whose calls then run on the caller for up to 0.64 s at a time. A lone
// hiccup (another tenant or the hypervisor taking a vCPU for a moment) costs one short back-off:
// with 20 ms doubling while stalls came within a second, a 2-vCPU guest whose vCPUs hiccup a few
// times a second had run 20-40% of a benchmark's calls on one thread. Which thread runs a task
// never changes a result, so this only trades parallelism for latency. stall_backoff = 0 turns
// it off. The verdict assumes the tasks of a call are of about equal size or ordered largest
// first (callers cut them so: tasks are claimed in order, so the caller's first task is then at
// least as long as any it waits for) and needs the caller to have run at least one task
// (otherwise its share says nothing about a task's length).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace specdec {

class ThreadPool {
 public:
  enum class Schedule { kDynamic, kStatic };

  // Parallel calls below this many tasks per thread leave load imbalance (a slow thread holds
  // a big share); above it the per-task cost grows for nothing. See task_count().
  static constexpr int kTasksPerThread = 4;

  static constexpr std::chrono::milliseconds kDefaultStallBackoff{5};

  // n_threads >= 1 counts the calling thread; 0 means default_thread_count().
  explicit ThreadPool(int n_threads = 0, std::chrono::milliseconds stall_backoff = kDefaultStallBackoff);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(task, thread_index) for every task; thread_index in [0, size()), 0 = the caller.
  // One task or a pool of one thread runs inline on the caller with no synchronisation.
  // Not reentrant: fn must not call parallel_for on the same pool, and one thread at a time
  // may call it. n_tasks < 2^31.
  void parallel_for(int n_tasks, const std::function<void(int task, int thread)>& fn,
                    Schedule schedule = Schedule::kDynamic);

  // How many tasks to cut `work` units into so that each task does at least min_task_work
  // units: 1 (run on the caller: the hand-off would cost more than it saves) when work <
  // 2 * min_task_work or size() == 1; else min(work / min_task_work, kTasksPerThread * size()),
  // at least 2. A pure function of (work, min_task_work, size()): the split never depends on
  // timing. Callers state min_task_work in their own units with its cost model.
  int task_count(int64_t work, int64_t min_task_work) const;

  // Physical cores of this machine (at least 1).
  static int default_thread_count();

  // What the stall back-off did so far (read by the calling thread, e.g. for a benchmark's
  // report: a run whose calls went to the caller alone measured one thread, not size()).
  struct StallStats {
    int64_t n_stalls = 0;        // stall verdicts, each starting a back-off
    int64_t n_inline_calls = 0;  // dynamic calls of 2+ tasks run on the caller alone in a back-off
  };
  StallStats stall_stats() const { return stall_stats_; }

 private:
  void worker_loop(int thread_index);
  bool run_published_job(uint32_t generation, int thread_index);  // whether it ran a task
  bool claim_task(uint32_t generation, int* task);
  void finish_tasks(uint32_t count);

  // Hand-off (thread_pool.cpp). The caller writes job_ / n_tasks_ / unfinished_, then claim_
  // (release), then bumps generation_, the futex word workers sleep on. claim_ packs
  // (generation << 32 | kStaticBit? | tasks left to claim); a task is claimed by a CAS that
  // also checks the generation, so a late worker can never claim a task of a later call.
  // unfinished_ counts tasks not yet finished; it is the futex word the caller sleeps on.
  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* job_ = nullptr;  // read only after a claim (or static job)
  int n_tasks_ = 0;                                     // likewise
  std::atomic<uint64_t> claim_{0};
  std::atomic<uint32_t> generation_{0};
  std::atomic<uint32_t> unfinished_{0};
  std::atomic<uint32_t> n_sleeping_{0};       // workers blocked (or about to block) on generation_
  std::atomic<bool> caller_sleeping_{false};  // the caller blocked (or about to) on unfinished_
  std::atomic<bool> stopping_{false};

  // Stall back-off state, used by the calling thread only.
  std::chrono::steady_clock::duration base_backoff_;
  std::chrono::steady_clock::duration backoff_{};
  std::chrono::steady_clock::time_point inline_until_{};  // dynamic calls run on the caller until then
  static constexpr std::chrono::milliseconds kStallRecurrence{100};
  static constexpr int kMaxBackoffFactor = 128;
  StallStats stall_stats_;
};

}  // namespace specdec
