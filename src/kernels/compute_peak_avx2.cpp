// AVX2 product loops for the compute-peak probe: vpmaddubsw ymm followed by the 16-bit add the
// AVX2 tiles pair it with, and vfmadd231ps ymm; 12 independent accumulators each.
#include <immintrin.h>

#include <cstring>

#include "kernels/compute_peak_internal.h"

namespace specdec::compute_peak_detail {

uint64_t int8_loop_avx2(int64_t iterations) {
  __m256i acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_epi16(static_cast<int16_t>(c));
  const __m256i w = _mm256_set1_epi8(3), a = _mm256_set1_epi8(-5);
  for (int64_t i = 0; i < iterations; ++i) {
    #pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_add_epi16(acc[c], _mm256_maddubs_epi16(w, a));
  }
  __m256i sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_epi16(sum, acc[c]);
  alignas(32) uint16_t lanes[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sum);
  uint64_t total = 0;
  for (uint16_t v : lanes) total += v;
  return total;
}

uint64_t f32_loop_avx2(int64_t iterations) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  const __m256 m = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f);
  for (int64_t i = 0; i < iterations; ++i) {
    #pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], m, b);
  }
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  float total = 0;
  for (float v : lanes) total += v;
  uint32_t bits;
  std::memcpy(&bits, &total, 4);
  return bits;
}

}  // namespace specdec::compute_peak_detail
