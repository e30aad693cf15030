// AVX-512 product loops for the compute-peak probe: vpdpbusd zmm and vfmadd231ps zmm, 12
// independent accumulators each (latency 4-5 cycles x up to 2 per cycle fits in 12).
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 AVX-512 headers (bug 105593)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "kernels/compute_peak_internal.h"

namespace specdec::compute_peak_detail {

uint64_t int8_loop_avx512(int64_t iterations) {
  __m512i acc[kChains];
  #pragma GCC unroll 12
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_epi32(c);
  const __m512i w = _mm512_set1_epi8(3), a = _mm512_set1_epi8(-5);
  for (int64_t i = 0; i < iterations; ++i) {
    #pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbusd_epi32(acc[c], w, a);
  }
  __m512i sum = acc[0];
  #pragma GCC unroll 12
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_epi32(sum, acc[c]);
  alignas(64) uint32_t lanes[16];  // summed as unsigned: the chains wrap around by design
  _mm512_store_si512(lanes, sum);
  uint64_t total = 0;
  for (uint32_t v : lanes) total += v;
  return total;
}

uint64_t f32_loop_avx512(int64_t iterations) {
  __m512 acc[kChains];
  #pragma GCC unroll 12
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512 m = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(0.001f);  // acc -> 1: no overflow, no subnormals
  for (int64_t i = 0; i < iterations; ++i) {
    #pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], m, b);
  }
  __m512 sum = acc[0];
  #pragma GCC unroll 12
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  const float total = _mm512_reduce_add_ps(sum);
  uint32_t bits;
  std::memcpy(&bits, &total, 4);
  return bits;
}

}  // namespace specdec::compute_peak_detail
