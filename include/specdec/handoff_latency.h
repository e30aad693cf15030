// specdec/handoff_latency.h — how long a write by one pool thread takes to reach another,
// measured: the cost every parallel call pays to publish its tasks, hand out task claims and
// report completion, and that data written by one thread and read by another pays per cache line.
//
// It tells where a machine put the threads. Two cores that share a last-level cache (one AMD
// CCD, one Intel socket) pass a cache line in ~30 ns; cores on different CCDs or sockets take
// ~100-500 ns. On the 2-vCPU Zen 4 VMs of docs/BENCHMARKS.md 55 the host moved the two vCPUs
// between one CCD and two within seconds: on one they read ~35 GB/s from memory (one CCD's link)
// and handed off in ~30 ns, on two they read ~60 GB/s and handed off in ~150 ns. This is the
// "slow" and "fast" memory regime of sections 47-54, and `specdec bench` reports it.
#pragma once

#include <vector>

namespace specdec {

class ThreadPool;

struct HandoffLatency {
  // (pool.size() - 1) one-way latency in ns between the calling thread and worker i + 1:
  // the wall time of round_trips round trips of a value through one cache line / (2 round_trips),
  // the fastest of the passes. Empty for a pool of one thread.
  std::vector<double> worker_ns;
  double max_ns() const;  // the slowest worker's (0 when empty)
};

// For each worker in turn, the calling thread and that worker pass a counter back and forth
// through one cache line (acquire loads in a `pause` loop, release stores), round_trips timed
// times per pass after a few untimed ones (the first waits for the worker to wake up), while the
// other workers wait; the fastest of `passes` passes is kept per worker. A worker
// the system deschedules mid-pass makes that pass slow, not wrong (hence the fastest).
// Requires round_trips >= 1 and passes >= 1 (Error naming the value otherwise).
// Cost: about passes * (pool.size() - 1) * 2 * round_trips * latency, plus one parallel call
// per pass and worker (~1 ms at the defaults on a 2-thread pool across CCDs).
HandoffLatency measure_handoff_latency(ThreadPool& pool, int round_trips = 1000, int passes = 3);

}  // namespace specdec
