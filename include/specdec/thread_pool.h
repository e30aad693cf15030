// specdec/thread_pool.h — the project's own fixed-size thread pool (no OpenMP: TSan-friendly).
//
// parallel_for(n_tasks, fn) runs fn(task, thread) for task in [0, n_tasks) on the calling thread
// plus the pool's workers, and returns when all are done. Tasks are handed out statically
// (task i runs on thread i % n_threads), so the split never depends on timing.
// Kernels parallelise over independent outputs only (columns, heads), never by splitting a
// reduction, so results do not depend on the thread count either.
#pragma once

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

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(int, int)>* job_ = nullptr;
  int n_tasks_ = 0;
  uint64_t generation_ = 0;
  int n_busy_ = 0;
  bool stopping_ = false;
};

}  // namespace specdec
