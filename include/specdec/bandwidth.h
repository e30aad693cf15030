// specdec/bandwidth.h — the machine's memory read bandwidth, measured (the roofline for decode).
#pragma once

#include <cstddef>
#include <cstdint>

namespace specdec {

class ThreadPool;

// Measures sustained read bandwidth from memory in GB/s (1e9 bytes per second).
// Requires: bytes >= 1 MiB (rounded down to a multiple of 4 KiB per thread), passes >= 1.
// Guarantees: allocates `bytes` (on transparent huge pages where the system grants them on
// request, as the repacked weights: advise_huge_pages; touched first by the threads that later
// read them), then
// runs `passes` passes in which all pool threads read disjoint slices with the widest loads
// of active_isa() (AVX-512 / AVX2 / 64-bit scalar), each pass twice on the SIMD targets: once
// as a plain loop and once with software prefetch ahead (the faster counts: on some machines
// prefetching reads ~10% faster, and so do the kernels' own prefetching decodes); returns the
// best pass (bytes / wall time of the slowest thread). Throws Error for bad arguments or when
// the buffer cannot be allocated.
// Cost: about 2 passes * bytes / bandwidth seconds (roughly 0.1 s per GiB read), plus the fill.
double measure_read_bandwidth_gbs(ThreadPool& pool, size_t bytes = size_t{1} << 30, int passes = 5);

// The same probe, kept allocated so that single passes can be interleaved with other timings
// (`specdec bench` pairs probe passes with decode repeats on a machine whose bandwidth varies).
// The constructor allocates and first-touches the buffer (same requirements and errors as
// above); pass() runs one pass and returns its GB/s. Not thread-safe; the pool must outlive it.
class ReadBandwidthProbe {
 public:
  ReadBandwidthProbe(ThreadPool& pool, size_t bytes);
  ~ReadBandwidthProbe();
  ReadBandwidthProbe(const ReadBandwidthProbe&) = delete;
  ReadBandwidthProbe& operator=(const ReadBandwidthProbe&) = delete;
  double pass();
  size_t bytes() const { return total_; }

 private:
  double read_pass(uint64_t (*read_fn)(const uint8_t*, size_t));  // one read of the buffer: GB/s

  ThreadPool& pool_;
  size_t slice_ = 0, total_ = 0;  // bytes per thread, in all
  unsigned char* buffer_ = nullptr;
};

}  // namespace specdec
