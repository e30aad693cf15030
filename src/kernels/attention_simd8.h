// kernels/attention_simd8.h — the AVX2 attention loops' 8-lane building blocks
// (attention_avx2.cpp). attention_avx512.cpp runs the same chains two to a 16-lane vector and
// writes the reduction tree below again for 16 sums at a time (horizontal_sums16): a change to
// the tree here must be made there too (Attention.Avx512InnerLoopsGiveTheAvx2Bits fails until
// it is). Anonymous namespace: each translation unit, compiled with its own ISA flags, keeps its
// own copy (see exp_nonpositive.h).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/exp_nonpositive.h"

namespace specdec::attention_detail {
namespace {

// Asks for the n_bytes at address in L2 (a hint: no fault, no effect on results). The AVX2 and
// AVX-512 loops' first pass over a call's keys asks for those kPrefetchKeysAhead ahead, over its
// values for the rows that follow them (the next call's): with K/V from L3 or memory the hardware
// prefetchers alone leave that pass waiting (attention_avx512.cpp's prefetch_row_l2: figures).
[[gnu::always_inline]] inline void prefetch_l2(uintptr_t address, int n_bytes) {
  const char* p = reinterpret_cast<const char*>(address);
  for (int l = 0; l < n_bytes; l += 64) _mm_prefetch(p + l, _MM_HINT_T1);
}

// How far ahead of the key being scored the first pass asks for keys (the AVX2 and AVX-512 loops).
constexpr int kPrefetchKeysAhead = 16;

// The distance in bytes from values[0] to the row after values[n - 1] when the n rows are evenly
// spaced (the cached prefix: the next call's rows follow), else 0.
template <typename E>
inline uintptr_t rows_ahead(const E* const* values, int n) {
  auto address = [](const E* p) { return reinterpret_cast<uintptr_t>(p); };
  if (n < 2 || address(values[1]) <= address(values[0])) return 0;
  const uintptr_t spacing = address(values[1]) - address(values[0]);
  const bool even = address(values[n - 1]) - address(values[0]) == spacing * static_cast<uintptr_t>(n - 1);
  return even ? spacing * static_cast<uintptr_t>(n) : 0;
}

// 8 keys or values from F32 or F16 storage (the F16 conversion is exact).
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// The 8 lane sums [sum(a[0]), ..., sum(a[7])], every vector's lanes l0..l7 added in the tree
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) (a 128-bit halves add, then movehl, then
// one shuffle, as a one-vector horizontal sum would), for 8 vectors at once: ~17 instructions
// instead of ~7 per vector.
inline __m256 horizontal_sums8(const __m256* a) {
  // s_k = lane k + lane k + 4 (the 128-bit halves added), vectors j and j + 4 side by side.
  auto halves = [](__m256 x, __m256 y) {
    return _mm256_add_ps(_mm256_permute2f128_ps(x, y, 0x20), _mm256_permute2f128_ps(x, y, 0x31));
  };
  const __m256 s04 = halves(a[0], a[4]), s15 = halves(a[1], a[5]), s26 = halves(a[2], a[6]), s37 = halves(a[3], a[7]);
  // (s0 + s2, s1 + s3) of two vectors per half: [k0_02, k1_02, k0_13, k1_13 | k4_02, k5_02, k4_13, k5_13]
  const __m256 p = _mm256_add_ps(_mm256_unpacklo_ps(s04, s15), _mm256_unpackhi_ps(s04, s15));
  const __m256 q = _mm256_add_ps(_mm256_unpacklo_ps(s26, s37), _mm256_unpackhi_ps(s26, s37));
  return _mm256_add_ps(_mm256_shuffle_ps(p, q, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(p, q, _MM_SHUFFLE(3, 2, 3, 2)));
}

// The end of the softmax's exp-and-sum pass (softmax_avx2, softmax_avx512): s holds the double
// sums of lanes 0-3 and 4-7 of the vector part's 8-value groups (added lanewise); the values
// n_vec..n one at a time (x[i] <- exp(x[i] - max_value)). Returns the total, in that order.
inline double softmax_sum_and_tail(__m256d s, float* x, int n_vec, int n, float max_value) {
  const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
  double sum = _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
  for (int i = n_vec; i < n; ++i) {
    alignas(32) float lane[8] = {x[i] - max_value};
    x[i] = _mm256_cvtss_f32(kernels_detail::exp_nonpositive(_mm256_load_ps(lane)));
    sum += static_cast<double>(x[i]);
  }
  return sum;
}

}  // namespace
}  // namespace specdec::attention_detail
