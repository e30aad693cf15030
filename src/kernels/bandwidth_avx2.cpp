// AVX2 read loops for the bandwidth probe: 256 bytes per iteration into 4 independent sums,
// with or without software prefetch (bandwidth_internal.h).
#include <immintrin.h>

#include "kernels/bandwidth_internal.h"

namespace specdec::bandwidth_detail {

namespace {
template <bool kPrefetch>
uint64_t read_lines(const uint8_t* p, size_t n_bytes) {
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i < n_bytes; i += 256) {
    if constexpr (kPrefetch) {
      const char* ahead = reinterpret_cast<const char*>(p + i + kProbePrefetchBytes);
      for (int line = 0; line < 4; ++line) _mm_prefetch(ahead + 64 * line, _MM_HINT_T1);
    }
    const __m256i* v = reinterpret_cast<const __m256i*>(p + i);
    s0 = _mm256_add_epi64(s0, _mm256_xor_si256(_mm256_load_si256(v + 0), _mm256_load_si256(v + 1)));
    s1 = _mm256_add_epi64(s1, _mm256_xor_si256(_mm256_load_si256(v + 2), _mm256_load_si256(v + 3)));
    s2 = _mm256_add_epi64(s2, _mm256_xor_si256(_mm256_load_si256(v + 4), _mm256_load_si256(v + 5)));
    s3 = _mm256_add_epi64(s3, _mm256_xor_si256(_mm256_load_si256(v + 6), _mm256_load_si256(v + 7)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
}  // namespace

uint64_t read_avx2(const uint8_t* p, size_t n_bytes) { return read_lines<false>(p, n_bytes); }
uint64_t read_avx2_prefetch(const uint8_t* p, size_t n_bytes) { return read_lines<true>(p, n_bytes); }

}  // namespace specdec::bandwidth_detail
