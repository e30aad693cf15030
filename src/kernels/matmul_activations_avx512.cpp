// AVX-512 version of quantize_activations (matmul_activations.cpp): the same float operations
// per value (x * inv_d, rounded half away from zero, clamped), so the same bytes and scales bit
// for bit; only the per-block reductions (max, integer sums) are vectorised, and both are exact.
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 AVX-512 headers (bug 105593)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "kernels/matmul_internal.h"

namespace specdec::matmul_detail {

namespace {

// round(q) half away from zero, exactly as std::round: trunc(q) plus +-1 when |frac| >= 0.5
// (q - trunc(q) is exact in float).
inline __m512 round_half_away(__m512 q) {
  const __m512 t = _mm512_roundscale_ps(q, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 frac = _mm512_abs_ps(_mm512_sub_ps(q, t));
  const __mmask16 up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 one = _mm512_or_ps(_mm512_set1_ps(1.0f), _mm512_and_ps(q, _mm512_set1_ps(-0.0f)));  // copysign(1, q)
  return _mm512_mask_add_ps(t, up, t, one);
}

// 16 values to int8 (as int32 lanes) after scaling by inv_d.
inline __m512i quantize16(__m512 x, __m512 inv_d) {
  __m512 q = round_half_away(_mm512_mul_ps(x, inv_d));
  q = _mm512_min_ps(_mm512_max_ps(q, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
  return _mm512_cvtps_epi32(q);  // exact: q is an integer
}

inline float max_lanes(__m512 v) {
  __m256 m8 = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline int sum_lanes(__m512i v) {
  __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti32x8_epi32(v, 1));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

void quantize_activations_avx512(const float* x, int M, int64_t n_in, const QuantizedActs& out) {
  const __mmask16 kNonFinite = 0x01 | 0x08 | 0x10 | 0x80;  // QNaN, +Inf, -Inf, SNaN
  for (int r = 0; r < M; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * n_in;        // (n_in)
    const QuantizedActs row = acts_from_row(out, r);
    int8_t* ar = row.values;  // (n_pad)
    for (int64_t b = 0; b < n_in; b += 32) {
      const __m512 x0 = _mm512_loadu_ps(xr + b), x1 = _mm512_loadu_ps(xr + b + 16);
      const bool finite = (_mm512_fpclass_ps_mask(x0, kNonFinite) | _mm512_fpclass_ps_mask(x1, kNonFinite)) == 0;
      const float amax = max_lanes(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
      float d = amax / 127.0f;
      const float inv_d = (finite && d > 0.0f) ? 1.0f / d : 0.0f;
      if (!finite) d = __builtin_nanf("");
      const __m512 inv = _mm512_set1_ps(inv_d);
      __m512i q0 = _mm512_setzero_si512(), q1 = _mm512_setzero_si512();  // a block with a non-finite value: zeros
      if (finite) q0 = quantize16(x0, inv), q1 = quantize16(x1, inv);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(ar + b), _mm512_cvtepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(ar + b + 16), _mm512_cvtepi32_epi8(q1));
      const int sum0 = sum_lanes(q0), sum1 = sum_lanes(q1);
      store_block_terms(row, b / 32, d, sum0, sum1);
    }
    zero_act_padding(row, n_in);
  }
}

}  // namespace specdec::matmul_detail
