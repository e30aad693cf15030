// ThreadPool (see thread_pool.h): dynamic task claiming, spin-then-futex waiting.
//
// Why dynamic claiming: on a machine with more runnable threads than cores, any worker may be
// descheduled for a whole timeslice (milliseconds). With a static split every parallel_for
// waited for that worker's share, and a forward pass issues ~7 matmuls per layer, so a 2-thread
// forward often took 4-8x as long as a 1-thread one. Now the caller runs every task nobody else
// has claimed, and waits only for tasks that another thread has already started.
//
// Protocol. The caller writes job_, n_tasks_ and unfinished_, then claim_ = (generation << 32 |
// tasks to claim) with release, then generation_ (seq_cst) and, if a worker sleeps, wakes it.
// A thread claims a task with a CAS on claim_ that also checks the generation, so a worker that
// wakes late (after the call has returned, or during a later call) can only claim tasks of the
// call whose generation it holds, and reads job_ / n_tasks_ only after a successful claim, when
// the call cannot have returned (its task is unfinished). Finishing a task decrements
// unfinished_ (release); the caller returns after seeing 0 (acquire).
// Sleep/wake races are closed Dekker-style with seq_cst: a sleeper announces itself (n_sleeping_
// / caller_sleeping_) and then re-checks the futex word, which the kernel re-checks again; the
// waker changes the word first and then reads the announcement.
#include "specdec/thread_pool.h"

#include <immintrin.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <fstream>
#include <set>
#include <string>
#include <utility>

namespace specdec {

namespace {

// How long a worker spins for the next call, and the caller for tasks still running elsewhere,
// before blocking in the kernel. Cost model: a futex wake costs the waker a syscall (~1-2 µs)
// and the sleeper ~5-50 µs to return on this kind of VM. The parallel calls of one forward pass
// follow each other within a few µs (activation quantization, row ops below their floors), so
// a worker spinning 20 µs catches the next one; the caller's wait is at most the rest of one
// task (tasks are >= ~4 µs, typically 5-25 µs). Blocking soon matters on an oversubscribed
// machine: a spinning (or sched_yield-ing) thread keeps its core busy, while a blocked one
// lets the kernel run a descheduled worker there at once (idle balancing), and a worker
// sharing a core with the caller stops competing with it.
//
// Both spins also grow with the work the thread just did in the call, up to kMaxTailSpin:
// a thread that finished its share waits for the tasks still running elsewhere, at most about
// one task, which is no longer than its own share (tasks are cut largest first or of equal
// size). Where a call has a few tasks of 20-40 µs per thread (16 threads at M = 1), a fixed
// 10-20 µs spin sent threads to sleep at the end of most calls, and every call then paid a
// futex wake (for 15 workers, ~10 µs of the caller's time) and the sleepers' return (5-50 µs
// on a VM) on its critical path. A thread that is still waiting after its own share plus the
// base spin sees a stall (a descheduled thread) or a long gap, and sleeps.
constexpr std::chrono::microseconds kWorkerSpin{20};
constexpr std::chrono::microseconds kCallerSpin{10};
constexpr std::chrono::microseconds kMaxTailSpin{200};

constexpr uint64_t kStaticBit = uint64_t{1} << 31;  // in claim_: a Schedule::kStatic call
constexpr uint64_t kCountMask = kStaticBit - 1;      // in claim_: tasks left to claim (or n_tasks if static)

uint32_t generation_of(uint64_t claim) { return static_cast<uint32_t>(claim >> 32); }

uint32_t* futex_word(std::atomic<uint32_t>& a) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);
  return reinterpret_cast<uint32_t*>(&a);
}

// Blocks while *word == expected (returns at once otherwise, or spuriously; callers re-check).
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected) {
  syscall(SYS_futex, futex_word(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>& word, int n_waiters) {
  syscall(SYS_futex, futex_word(word), FUTEX_WAKE_PRIVATE, n_waiters, nullptr, nullptr, 0);
}

// Polls done() with `pause` for up to `budget`; returns whether it became true.
template <typename Done>
bool spin_until(Done done, std::chrono::steady_clock::duration budget) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1;; ++i) {
    if (done()) return true;
    _mm_pause();
    if (i % 32 == 0 && std::chrono::steady_clock::now() - start > budget) return done();
  }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads, std::chrono::milliseconds stall_backoff)
    : n_threads_(n_threads > 0 ? n_threads : default_thread_count()), base_backoff_(stall_backoff) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true);
  generation_.fetch_add(1);
  futex_wake(generation_, INT_MAX);
  for (auto& t : workers_) t.join();
}

int ThreadPool::task_count(int64_t work, int64_t min_task_work) const {
  if (n_threads_ <= 1 || min_task_work <= 0 || work < 2 * min_task_work) return 1;
  const int64_t most = static_cast<int64_t>(kTasksPerThread) * n_threads_;
  return static_cast<int>(std::clamp<int64_t>(work / min_task_work, 2, most));
}

void ThreadPool::parallel_for(int n_tasks, const std::function<void(int, int)>& fn, Schedule schedule) {
  if (n_tasks <= 0) return;
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  const bool is_static = schedule == Schedule::kStatic;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point published = Clock::now();  // ~20 ns (vDSO)
  if (!is_static && published < inline_until_) {
    ++stall_stats_.n_inline_calls;
    for (int t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  job_ = &fn;
  n_tasks_ = n_tasks;
  unfinished_.store(static_cast<uint32_t>(n_tasks), std::memory_order_relaxed);
  const uint32_t generation = generation_.load(std::memory_order_relaxed) + 1;
  claim_.store(uint64_t{generation} << 32 | (is_static ? kStaticBit : 0) | static_cast<uint64_t>(n_tasks),
               std::memory_order_release);
  generation_.store(generation);  // seq_cst: ordered before the n_sleeping_ check below
  if (n_sleeping_.load() > 0) futex_wake(generation_, INT_MAX);

  uint32_t n_done = 0;
  if (is_static) {
    for (int t = 0; t < n_tasks; t += n_threads_, ++n_done) fn(t, 0);
  } else {
    for (int t; claim_task(generation, &t); ++n_done) fn(t, 0);
  }
  if (unfinished_.fetch_sub(n_done, std::memory_order_acq_rel) == n_done) return;
  const Clock::time_point own_done = Clock::now();
  const Clock::duration spin = kCallerSpin + std::min<Clock::duration>(own_done - published, kMaxTailSpin);
  if (spin_until([this] { return unfinished_.load(std::memory_order_acquire) == 0; }, spin)) return;
  caller_sleeping_.store(true);
  for (uint32_t left; (left = unfinished_.load()) != 0;) futex_wait(unfinished_, left);
  caller_sleeping_.store(false, std::memory_order_relaxed);
  // No verdict when the caller ran no task (the workers claimed them all): its share then says
  // nothing about how long a task takes, and a task of ~1 ms (attention over a long context on
  // 16 threads) read as a stall sent every later call to the caller alone.
  if (is_static || base_backoff_.count() <= 0 || n_done == 0) return;
  // A stall: the wait for tasks running elsewhere outlasted the caller's whole share of the call
  // by more than kStallSlack (a worker that runs keeps pace with the caller: its unfinished
  // work is at most about one task, and callers cut a call into tasks of about equal size or
  // largest first, so the caller's first task is at least as long as any it waits for).
  constexpr std::chrono::microseconds kStallSlack{200};
  const Clock::time_point now = Clock::now();
  const Clock::duration excess = (now - own_done) - (own_done - published);
  if (excess <= kStallSlack) return;
  ++stall_stats_.n_stalls;
  // The back-off doubles only while stalls come right after the previous back-off ends (an
  // oversubscribed machine: its calls go to the caller for up to kMaxBackoffFactor x the base);
  // a lone hiccup of another tenant or the hypervisor costs one base back-off.
  const bool recurring = backoff_.count() > 0 && now - inline_until_ < kStallRecurrence;
  backoff_ = recurring ? std::min(backoff_ * 2, base_backoff_ * kMaxBackoffFactor) : base_backoff_;
  inline_until_ = now + backoff_;
}

bool ThreadPool::claim_task(uint32_t generation, int* task) {
  uint64_t claim = claim_.load(std::memory_order_relaxed);
  for (;;) {
    if (generation_of(claim) != generation || (claim & kStaticBit) || (claim & kCountMask) == 0) return false;
    if (claim_.compare_exchange_weak(claim, claim - 1, std::memory_order_acquire, std::memory_order_relaxed)) {
      *task = n_tasks_ - static_cast<int>(claim & kCountMask);  // ascending: 0, 1, ...
      return true;
    }
  }
}

void ThreadPool::finish_tasks(uint32_t count) {
  if (count == 0) return;
  if (unfinished_.fetch_sub(count) == count && caller_sleeping_.load()) futex_wake(unfinished_, 1);
}

bool ThreadPool::run_published_job(uint32_t generation, int thread_index) {
  const uint64_t claim = claim_.load(std::memory_order_acquire);
  if (generation_of(claim) != generation) return false;  // a later call is being published; see it next
  uint32_t n_done = 0;
  if (claim & kStaticBit) {
    // The caller waits for this thread's share, so job_ and n_tasks_ stay valid here.
    const int n_tasks = static_cast<int>(claim & kCountMask);
    for (int t = thread_index; t < n_tasks; t += n_threads_, ++n_done) (*job_)(t, thread_index);
  } else {
    for (int t; claim_task(generation, &t); ++n_done) (*job_)(t, thread_index);
  }
  finish_tasks(n_done);
  return n_done > 0;
}

void ThreadPool::worker_loop(int thread_index) {
  using Clock = std::chrono::steady_clock;
  uint32_t seen = 0;
  Clock::duration spin = kWorkerSpin;  // grows with the work done in the last call
  for (;;) {
    const auto changed = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(changed, spin)) {
      n_sleeping_.fetch_add(1);
      while (generation_.load() == seen) futex_wait(generation_, seen);
      n_sleeping_.fetch_sub(1);
    }
    if (stopping_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    const Clock::time_point start = Clock::now();
    const bool worked = run_published_job(seen, thread_index);
    spin = kWorkerSpin + (worked ? std::min<Clock::duration>(Clock::now() - start, kMaxTailSpin) : Clock::duration{});
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
