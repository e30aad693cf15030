// ThreadPool: static task assignment (task i on thread i % n_threads) with a spin-then-sleep
// hand-off. A forward pass issues ~100 parallel_for calls per token, so waking workers through
// a condition variable each time (tens of microseconds) would cost more than small matmuls;
// workers therefore spin for a short while after each job (kSpinTime) before sleeping, and the
// caller spins the same way for completion.
//
// Memory ordering (TSan-visible): the caller writes job_/n_tasks_ then bumps generation_
// (release); a worker reads them after seeing the new generation (acquire). Workers finish with
// n_busy_.fetch_sub (release); the caller sees 0 (acquire) before returning. Sleep/wake races
// are closed Dekker-style with seq_cst: a sleeper first announces itself (n_sleeping_ /
// caller_sleeping_) and then re-checks the condition under the mutex; the waker first changes
// the condition and then checks the announcement, notifying under the mutex.
#include "specdec/thread_pool.h"

#include <immintrin.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace specdec {

namespace {

// How long a worker waits for the next job, and the caller for completion, before blocking.
constexpr std::chrono::microseconds kSpinTime{50};

// Polls done() for up to kSpinTime; returns whether it became true. The first polls are pause
// loops (a job that follows at once is caught within a microsecond); after that each poll
// yields the core, so on a machine with more runnable threads than cores the spinning thread
// does not keep the one it waits for off the CPU (pure spinning there cost ~15x more than
// sleeping; yielding costs about the same as sleeping).
template <typename Done>
bool spin_until(Done done) {
  constexpr int kPausePolls = 64;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1;; ++i) {
    if (done()) return true;
    if (i <= kPausePolls) {
      _mm_pause();
    } else {
      std::this_thread::yield();
    }
    if (i % 16 == 0 && std::chrono::steady_clock::now() - start > kSpinTime) return done();
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads > 0 ? n_threads : default_thread_count()) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true);
  {
    std::lock_guard<std::mutex> lock(mutex_);
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
  job_ = &fn;
  n_tasks_ = n_tasks;
  n_busy_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1);  // seq_cst: publishes job_, n_tasks_, n_busy_
  if (n_sleeping_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mutex_); }
    work_ready_.notify_all();
  }
  // Static assignment: thread i runs tasks i, i + n_threads, ...
  for (int t = 0; t < n_tasks; t += n_threads_) fn(t, 0);
  if (spin_until([this] { return n_busy_.load(std::memory_order_acquire) == 0; })) return;
  std::unique_lock<std::mutex> lock(mutex_);
  caller_sleeping_.store(true);
  work_done_.wait(lock, [this] { return n_busy_.load() == 0; });
  caller_sleeping_.store(false);
}

void ThreadPool::worker_loop(int thread_index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = seen;
    spin_until([&] {
      gen = generation_.load(std::memory_order_acquire);
      return gen != seen || stopping_.load(std::memory_order_relaxed);
    });
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      n_sleeping_.fetch_add(1);
      work_ready_.wait(lock, [&] { return stopping_.load() || generation_.load() != seen; });
      n_sleeping_.fetch_sub(1);
      gen = generation_.load();
    }
    if (stopping_.load()) return;
    seen = gen;
    const std::function<void(int, int)>* job = job_;
    const int n_tasks = n_tasks_;
    for (int t = thread_index; t < n_tasks; t += n_threads_) (*job)(t, thread_index);
    if (n_busy_.fetch_sub(1) == 1 && caller_sleeping_.load()) {
      { std::lock_guard<std::mutex> lock(mutex_); }
      work_done_.notify_one();
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
