// specdec/thread_pool.h — the project's own fixed-size thread pool (no OpenMP: TSan-friendly).
//
// parallel_for(n_tasks, fn) runs fn(task, thread) for task in [0, n_tasks) on the calling thread
// plus the pool's workers, and returns when all are done. Tasks are handed out statically
// (task i runs on thread i % n_threads), so the split never depends on timing.
// Kernels parallelise over independent outputs only (columns, heads), never by splitting a
// reduction, so results do not depend on the thread count either.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace specdec {

class ThreadPool {
 public:
  // n_threads >= 1 counts the calling thread; 0 means default_thread_count().
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(task, thread_index) for every task; thread_index in [0, size()).
  // Not reentrant: fn must not call parallel_for on the same pool.
  void parallel_for(int n_tasks, const std::function<void(int task, int thread)>& fn);

  // Physical cores of this machine (at least 1).
  static int default_thread_count();

 private:
  void worker_loop(int thread_index);

  // Hand-off (thread_pool.cpp): workers spin briefly on generation_ after each job, then sleep
  // on work_ready_; the caller spins briefly on n_busy_, then sleeps on work_done_. The
  // sleeping counters tell the other side whether a notify is needed.
  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(int, int)>* job_ = nullptr;  // published by generation_ (release)
  int n_tasks_ = 0;                                     // published by generation_ (release)
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> n_busy_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<int> n_sleeping_{0};        // workers blocked (or about to block) on work_ready_
  std::atomic<bool> caller_sleeping_{false};  // the caller blocked (or about to) on work_done_
};

}  // namespace specdec
