// kernels/bandwidth_internal.h — per-ISA read loops behind measure_read_bandwidth_gbs().
#pragma once

#include <cstddef>
#include <cstdint>

namespace specdec::bandwidth_detail {

// Reads n_bytes from p (64-byte aligned, n_bytes a multiple of 256) and returns a checksum that
// depends on every byte read, so the loads cannot be optimised away.
uint64_t read_scalar(const uint8_t* p, size_t n_bytes);
uint64_t read_avx2(const uint8_t* p, size_t n_bytes);
uint64_t read_avx512(const uint8_t* p, size_t n_bytes);

// The same loops with each 256-byte step also prefetching (prefetcht1) the 4 lines
// kProbePrefetchBytes ahead: past the slice's end harmless (a hint, never a fault). On some
// machines software prefetch reads faster than the hardware prefetchers alone (BENCHMARKS 36:
// ~10% on an Emerald Rapids VM, where the decode's own prefetches had outrun the plain loop),
// so the probe times both and keeps the faster: the roofline is the best a reader achieves.
constexpr size_t kProbePrefetchBytes = 4096;
uint64_t read_avx2_prefetch(const uint8_t* p, size_t n_bytes);
uint64_t read_avx512_prefetch(const uint8_t* p, size_t n_bytes);

}  // namespace specdec::bandwidth_detail
