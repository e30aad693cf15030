// kernels/compute_peak_internal.h — per-ISA product loops behind measure_compute_peak().
#pragma once

#include <cstdint>

namespace specdec::compute_peak_detail {

// Each loop runs `iterations` iterations of 12 independent multiply-add instructions on
// register operands and returns a checksum of the accumulators (so the work cannot be
// optimised away). Multiply-adds per iteration:
constexpr int64_t kChains = 12;
constexpr int64_t kInt8MacsAvx512 = kChains * 64;  // vpdpbusd zmm: 16 lanes x 4 byte products
constexpr int64_t kF32MacsAvx512 = kChains * 16;   // vfmadd231ps zmm
constexpr int64_t kInt8MacsAvx2 = kChains * 32;    // vpmaddubsw ymm: 32 byte products (+ vpaddw)
constexpr int64_t kF32MacsAvx2 = kChains * 8;      // vfmadd231ps ymm
constexpr int64_t kInt8MacsVnni256 = kChains * 32;  // vpdpbusd ymm: 8 lanes x 4 byte products

uint64_t int8_loop_avx512(int64_t iterations);
uint64_t f32_loop_avx512(int64_t iterations);
uint64_t int8_loop_avx2(int64_t iterations);
uint64_t f32_loop_avx2(int64_t iterations);
uint64_t int8_loop_avx_vnni(int64_t iterations);      // {vex} vpdpbusd ymm (AVX-VNNI)
uint64_t int8_loop_evex_vnni256(int64_t iterations);  // {evex} vpdpbusd ymm (AVX-512 VNNI + VL)

}  // namespace specdec::compute_peak_detail
