// AVX-512 read loops for the bandwidth probe: 256 bytes per iteration into 2 independent sums,
// with or without software prefetch (bandwidth_internal.h).
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 AVX-512 headers (bug 105593)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/bandwidth_internal.h"

namespace specdec::bandwidth_detail {

namespace {
template <bool kPrefetch>
uint64_t read_lines(const uint8_t* p, size_t n_bytes) {
  __m512i s0 = _mm512_setzero_si512(), s1 = s0;
  for (size_t i = 0; i < n_bytes; i += 256) {
    if constexpr (kPrefetch) {
      const char* ahead = reinterpret_cast<const char*>(p + i + kProbePrefetchBytes);
      for (int line = 0; line < 4; ++line) _mm_prefetch(ahead + 64 * line, _MM_HINT_T1);
    }
    const __m512i* v = reinterpret_cast<const __m512i*>(p + i);
    s0 = _mm512_add_epi64(s0, _mm512_xor_si512(_mm512_load_si512(v + 0), _mm512_load_si512(v + 1)));
    s1 = _mm512_add_epi64(s1, _mm512_xor_si512(_mm512_load_si512(v + 2), _mm512_load_si512(v + 3)));
  }
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_add_epi64(s0, s1));
  uint64_t sum = 0;
  for (uint64_t v : lanes) sum += v;
  return sum;
}
}  // namespace

uint64_t read_avx512(const uint8_t* p, size_t n_bytes) { return read_lines<false>(p, n_bytes); }
uint64_t read_avx512_prefetch(const uint8_t* p, size_t n_bytes) { return read_lines<true>(p, n_bytes); }

}  // namespace specdec::bandwidth_detail
