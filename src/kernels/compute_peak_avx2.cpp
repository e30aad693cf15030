// AVX2 product loops for the compute-peak probe: vpmaddubsw ymm followed by the 16-bit add the
// AVX2 tiles pair it with, and vfmadd231ps ymm; 12 independent accumulators each.
#include <immintrin.h>

#include <cstring>

#include "kernels/compute_peak_internal.h"

namespace specdec::compute_peak_detail {

uint64_t int8_loop_avx2(int64_t iterations) {
  __m256i c0 = _mm256_set1_epi16(0), c1 = _mm256_set1_epi16(1), c2 = _mm256_set1_epi16(2), c3 = _mm256_set1_epi16(3);
  __m256i c4 = _mm256_set1_epi16(4), c5 = _mm256_set1_epi16(5), c6 = _mm256_set1_epi16(6), c7 = _mm256_set1_epi16(7);
  __m256i c8 = _mm256_set1_epi16(8), c9 = _mm256_set1_epi16(9), c10 = _mm256_set1_epi16(10), c11 = _mm256_set1_epi16(11);
  const __m256i w = _mm256_set1_epi8(3), a = _mm256_set1_epi8(-5);
  // In assembly: 12 accumulators, 2 product temporaries (renamed by the core) and the two
  // inputs fill the 16 ymm registers. Written in C, the compiler hoisted the loop-invariant
  // product out of the loop, or (with chains feeding the products) spilled accumulators.
  static_assert(kChains == 12);
  for (int64_t i = 0; i < iterations; ++i) {
    __m256i t0, t1;
    __asm__(
        "vpmaddubsw %[a], %[w], %[t0]\n\tvpaddw %[t0], %[c0], %[c0]\n\t"
        "vpmaddubsw %[a], %[w], %[t1]\n\tvpaddw %[t1], %[c1], %[c1]\n\t"
        "vpmaddubsw %[a], %[w], %[t0]\n\tvpaddw %[t0], %[c2], %[c2]\n\t"
        "vpmaddubsw %[a], %[w], %[t1]\n\tvpaddw %[t1], %[c3], %[c3]\n\t"
        "vpmaddubsw %[a], %[w], %[t0]\n\tvpaddw %[t0], %[c4], %[c4]\n\t"
        "vpmaddubsw %[a], %[w], %[t1]\n\tvpaddw %[t1], %[c5], %[c5]\n\t"
        "vpmaddubsw %[a], %[w], %[t0]\n\tvpaddw %[t0], %[c6], %[c6]\n\t"
        "vpmaddubsw %[a], %[w], %[t1]\n\tvpaddw %[t1], %[c7], %[c7]\n\t"
        "vpmaddubsw %[a], %[w], %[t0]\n\tvpaddw %[t0], %[c8], %[c8]\n\t"
        "vpmaddubsw %[a], %[w], %[t1]\n\tvpaddw %[t1], %[c9], %[c9]\n\t"
        "vpmaddubsw %[a], %[w], %[t0]\n\tvpaddw %[t0], %[c10], %[c10]\n\t"
        "vpmaddubsw %[a], %[w], %[t1]\n\tvpaddw %[t1], %[c11], %[c11]\n\t"
        : [c0] "+x"(c0), [c1] "+x"(c1), [c2] "+x"(c2), [c3] "+x"(c3), [c4] "+x"(c4), [c5] "+x"(c5),
          [c6] "+x"(c6), [c7] "+x"(c7), [c8] "+x"(c8), [c9] "+x"(c9), [c10] "+x"(c10), [c11] "+x"(c11),
          [t0] "=&x"(t0), [t1] "=&x"(t1)
        : [w] "x"(w), [a] "x"(a));
  }
  const __m256i sum = _mm256_add_epi16(
      _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(c0, c1), _mm256_add_epi16(c2, c3)),
                       _mm256_add_epi16(_mm256_add_epi16(c4, c5), _mm256_add_epi16(c6, c7))),
      _mm256_add_epi16(_mm256_add_epi16(c8, c9), _mm256_add_epi16(c10, c11)));
  alignas(32) uint16_t lanes[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sum);
  uint64_t total = 0;
  for (uint16_t v : lanes) total += v;
  return total;
}

// vpdpbusd ymm (Isa::Avx2Vnni's products), in the VEX (AVX-VNNI) or EVEX (AVX-512 VNNI + VL)
// encoding: written in assembly with an explicit encoding prefix, so this file keeps the AVX2
// flags and only the CPU that runs the loop needs the extension.
template <bool kVex>
uint64_t int8_loop_vnni256(int64_t iterations) {
  __m256i c[kChains];
  #pragma GCC unroll 12
  for (int i = 0; i < kChains; ++i) c[i] = _mm256_set1_epi32(i);
  const __m256i w = _mm256_set1_epi8(3), a = _mm256_set1_epi8(-5);
  static_assert(kChains == 12);
  // 12 chains of the form "{vex} vpdpbusd %[a], %[w], %[c0]" (prefix P, its braces escaped for
  // the asm template: %{ %}), with their operands.
#define SPECDEC_DP2(P, i, j) P " vpdpbusd %[a], %[w], %[c" #i "]\n\t" P " vpdpbusd %[a], %[w], %[c" #j "]\n\t"
#define SPECDEC_DP_LOOP(P)                                                                                       \
  __asm__(SPECDEC_DP2(P, 0, 1) SPECDEC_DP2(P, 2, 3) SPECDEC_DP2(P, 4, 5) SPECDEC_DP2(P, 6, 7) SPECDEC_DP2(P, 8, 9) \
              SPECDEC_DP2(P, 10, 11)                                                                             \
          : [c0] "+x"(c[0]), [c1] "+x"(c[1]), [c2] "+x"(c[2]), [c3] "+x"(c[3]), [c4] "+x"(c[4]), [c5] "+x"(c[5]), \
            [c6] "+x"(c[6]), [c7] "+x"(c[7]), [c8] "+x"(c[8]), [c9] "+x"(c[9]), [c10] "+x"(c[10]), [c11] "+x"(c[11]) \
          : [w] "x"(w), [a] "x"(a))
  for (int64_t i = 0; i < iterations; ++i) {
    if constexpr (kVex) {
      SPECDEC_DP_LOOP("%{vex%}");
    } else {
      SPECDEC_DP_LOOP("%{evex%}");
    }
  }
#undef SPECDEC_DP_LOOP
#undef SPECDEC_DP2
  __m256i sum = c[0];
  #pragma GCC unroll 12
  for (int i = 1; i < kChains; ++i) sum = _mm256_add_epi32(sum, c[i]);
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sum);
  uint64_t total = 0;
  for (uint32_t v : lanes) total += v;
  return total;
}

uint64_t int8_loop_avx_vnni(int64_t iterations) { return int8_loop_vnni256<true>(iterations); }
uint64_t int8_loop_evex_vnni256(int64_t iterations) { return int8_loop_vnni256<false>(iterations); }

uint64_t f32_loop_avx2(int64_t iterations) {
  __m256 acc[kChains];
  #pragma GCC unroll 12
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  const __m256 m = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f);
  for (int64_t i = 0; i < iterations; ++i) {
    #pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], m, b);
  }
  __m256 sum = acc[0];
  #pragma GCC unroll 12
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
