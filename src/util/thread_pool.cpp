#include "specdec/thread_pool.h"

#include <unistd.h>

#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace specdec {

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads > 0 ? n_threads : default_thread_count()) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::parallel_for(int n_tasks, const std::function<void(int, int)>& fn) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    n_tasks_ = n_tasks;
    n_busy_ = n_threads_ - 1;
    ++generation_;
  }
  work_ready_.notify_all();
  // Static assignment: thread i runs tasks i, i + n_threads, ...
  for (int t = 0; t < n_tasks; t += n_threads_) fn(t, 0);
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [this] { return n_busy_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int thread_index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int, int)>* job;
    int n_tasks;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
      n_tasks = n_tasks_;
    }
    for (int t = thread_index; t < n_tasks; t += n_threads_) (*job)(t, thread_index);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--n_busy_ == 0) work_done_.notify_one();
    }
  }
}

int ThreadPool::default_thread_count() {
  // Physical cores: distinct (physical id, core id) pairs in /proc/cpuinfo.
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;
  std::string line, phys = "0";
  while (std::getline(in, line)) {
    auto value = [&] { auto p = line.find(':'); return p == std::string::npos ? std::string() : line.substr(p + 1); };
    if (line.rfind("physical id", 0) == 0) phys = value();
    if (line.rfind("core id", 0) == 0) cores.emplace(phys, value());
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

}  // namespace specdec
