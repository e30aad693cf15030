// measure_read_bandwidth_gbs(): the buffer, the threads, the timing (read loops per ISA in
// bandwidth_avx2.cpp / bandwidth_avx512.cpp).
#include "specdec/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/bandwidth_internal.h"
#include "specdec/cpu.h"
#include "specdec/error.h"
#include "specdec/mmap_file.h"
#include "specdec/thread_pool.h"

namespace specdec {

namespace bandwidth_detail {

uint64_t read_scalar(const uint8_t* p, size_t n_bytes) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i < n_bytes; i += 32) {
    uint64_t v[4];
    std::memcpy(v, p + i, 32);
    s0 += v[0]; s1 ^= v[1]; s2 += v[2]; s3 ^= v[3];
  }
  return s0 + s1 + s2 + s3;
}

}  // namespace bandwidth_detail

namespace {

constexpr size_t kSliceAlign = 4096;

}  // namespace

ReadBandwidthProbe::ReadBandwidthProbe(ThreadPool& pool, size_t bytes) : pool_(pool) {
  if (bytes < (size_t{1} << 20)) throw Error("bandwidth probe: " + std::to_string(bytes) + " bytes is below 1 MiB");
  const int n_threads = pool.size();
  slice_ = bytes / static_cast<size_t>(n_threads) / kSliceAlign * kSliceAlign;  // per thread
  total_ = slice_ * static_cast<size_t>(n_threads);
  // On transparent huge pages where the system grants them, as the repacked weights are
  // (Transformer::Weights::repack): with 4 KiB pages the probe read up to ~20% slower than a
  // decode over huge pages on the Zen 4 VM of BENCHMARKS 35, and the ratio would flatter it.
  void* p = nullptr;
  if (::posix_memalign(&p, kHugePageBytes, total_) != 0) p = nullptr;
  buffer_ = static_cast<unsigned char*>(p);
  if (buffer_ == nullptr) throw Error("bandwidth probe: cannot allocate " + std::to_string(total_) + " bytes");
  advise_huge_pages(buffer_, total_);
  // Each thread touches its own slice first (page placement near the reader).
  uint8_t* base = buffer_;
  const size_t slice = slice_;
  pool.parallel_for(n_threads, [&](int task, int) {
    uint8_t* p = base + static_cast<size_t>(task) * slice;
    for (size_t i = 0; i < slice; ++i) p[i] = static_cast<uint8_t>(i * 131 + static_cast<size_t>(task));
  }, ThreadPool::Schedule::kStatic);
}

ReadBandwidthProbe::~ReadBandwidthProbe() { std::free(buffer_); }

double ReadBandwidthProbe::pass() {
  using namespace bandwidth_detail;
  using ReadFn = uint64_t (*)(const uint8_t*, size_t);
  ReadFn plain = read_scalar, prefetching = nullptr;  // the scalar path has no prefetching loop
  if (active_isa() == Isa::Avx512) plain = read_avx512, prefetching = read_avx512_prefetch;
  if (vector_isa(active_isa()) == Isa::Avx2) plain = read_avx2, prefetching = read_avx2_prefetch;
  const double gbs = read_pass(plain);
  return prefetching ? std::max(gbs, read_pass(prefetching)) : gbs;
}

double ReadBandwidthProbe::read_pass(uint64_t (*read_fn)(const uint8_t*, size_t)) {
  const int n_threads = pool_.size();
  std::vector<uint64_t> checksums(static_cast<size_t>(n_threads));  // (n_threads)
  const uint8_t* base = buffer_;
  const auto start = std::chrono::steady_clock::now();
  pool_.parallel_for(n_threads, [&](int task, int) {
    checksums[static_cast<size_t>(task)] = read_fn(base + static_cast<size_t>(task) * slice_, slice_);
  }, ThreadPool::Schedule::kStatic);  // every thread reads its own slice at the same time
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  volatile uint64_t sink = 0;
  for (uint64_t c : checksums) sink = sink + c;
  (void)sink;
  return seconds > 0.0 ? static_cast<double>(total_) / seconds / 1e9 : 0.0;
}

double measure_read_bandwidth_gbs(ThreadPool& pool, size_t bytes, int passes) {
  if (bytes < (size_t{1} << 20)) throw Error("bandwidth probe: " + std::to_string(bytes) + " bytes is below 1 MiB");
  if (passes < 1) throw Error("bandwidth probe: passes = " + std::to_string(passes) + " (need >= 1)");
  ReadBandwidthProbe probe(pool, bytes);
  double best_gbs = 0.0;
  for (int pass = 0; pass < passes; ++pass) best_gbs = std::max(best_gbs, probe.pass());
  return best_gbs;
}

}  // namespace specdec
