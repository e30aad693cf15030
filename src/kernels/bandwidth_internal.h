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

}  // namespace specdec::bandwidth_detail
