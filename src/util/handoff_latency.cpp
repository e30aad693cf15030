// measure_handoff_latency(): a counter passed back and forth through one cache line between the
// calling thread and each pool worker (specdec/handoff_latency.h).
#include "specdec/handoff_latency.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>

#include "specdec/error.h"
#include "specdec/thread_pool.h"

namespace specdec {

double HandoffLatency::max_ns() const {
  return worker_ns.empty() ? 0.0 : *std::max_element(worker_ns.begin(), worker_ns.end());
}

namespace {

// The line the two threads share, alone in its cache line (no other data moves with it).
struct alignas(64) SharedLine {
  std::atomic<int> value{0};
  char pad[64 - sizeof(std::atomic<int>)];
};

// Round trips before the clock starts: the first waits for the worker to wake up (tens of
// microseconds from a futex on a VM, against ~30-500 ns per hand-off).
constexpr int kWarmupRoundTrips = 16;

// Round trip i: the caller waits for 2i and writes 2i + 1; the worker waits for 2i + 1 and
// writes 2i + 2. `first` is 0 for the caller, 1 for the worker.
void pass_counter(SharedLine& line, int first, int begin, int end) {
  for (int i = begin; i < end; ++i) {
    const int expected = 2 * i + first;
    while (line.value.load(std::memory_order_acquire) != expected) _mm_pause();
    line.value.store(expected + 1, std::memory_order_release);
  }
}

}  // namespace

HandoffLatency measure_handoff_latency(ThreadPool& pool, int round_trips, int passes) {
  if (round_trips < 1) throw Error("hand-off latency: round trips " + std::to_string(round_trips) + " must be >= 1");
  if (passes < 1) throw Error("hand-off latency: passes " + std::to_string(passes) + " must be >= 1");
  HandoffLatency result;
  const int n_threads = pool.size();
  for (int worker = 1; worker < n_threads; ++worker) {
    double best = 0;
    for (int pass = 0; pass < passes; ++pass) {
      SharedLine line;
      double seconds = 0;
      // Static schedule: task t runs on thread t, all at once; only the caller (0) and `worker` take part.
      pool.parallel_for(n_threads, [&](int task, int) {
        const int total = kWarmupRoundTrips + round_trips;
        if (task == worker) {
          pass_counter(line, 1, 0, total);
        } else if (task == 0) {
          pass_counter(line, 0, 0, kWarmupRoundTrips);
          while (line.value.load(std::memory_order_acquire) != 2 * kWarmupRoundTrips) _mm_pause();
          const auto start = std::chrono::steady_clock::now();
          pass_counter(line, 0, kWarmupRoundTrips, total);
          while (line.value.load(std::memory_order_acquire) != 2 * total) _mm_pause();  // the last answer
          seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        }
      }, ThreadPool::Schedule::kStatic);
      const double ns = seconds / (2.0 * round_trips) * 1e9;
      if (pass == 0 || ns < best) best = ns;
    }
    result.worker_ns.push_back(best);
  }
  return result;
}

}  // namespace specdec
