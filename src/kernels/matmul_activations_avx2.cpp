// AVX2 version of quantize_activations (matmul_activations.cpp), for the AVX2 matmul path: the
// same float operations per value as the scalar code (x * inv_d, rounded half away from zero,
// clamped), so the same bytes and scales bit for bit; only the per-block reductions (max,
// integer sums) are vectorised, and both are exact. Mirrors matmul_activations_avx512.cpp.
// Cost: O(M * n_in), about 30 vector operations per block of 32 values.
#include <immintrin.h>

#include <cstring>

#include "kernels/matmul_internal.h"

namespace specdec::matmul_detail {

namespace {

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// round(q) half away from zero, exactly as std::round: trunc(q) plus +-1 when |frac| >= 0.5
// (q - trunc(q) is exact in float).
inline __m256 round_half_away(__m256 q) {
  const __m256 t = _mm256_round_ps(q, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = abs_ps(_mm256_sub_ps(q, t));
  const __m256 up = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(q, _mm256_set1_ps(-0.0f)));  // copysign(1, q)
  return _mm256_add_ps(t, _mm256_and_ps(up, one));  // t + 0 = t (a -0 may become +0: the same integer)
}

// 8 values to int8 range (as int32 lanes) after scaling by inv_d.
inline __m256i quantize8(__m256 x, __m256 inv_d) {
  __m256 q = round_half_away(_mm256_mul_ps(x, inv_d));
  q = _mm256_min_ps(_mm256_max_ps(q, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
  return _mm256_cvtps_epi32(q);  // exact: q is an integer
}

inline float max_lanes(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline int sum_lanes(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// All 8 lanes finite (x - x is 0 exactly for finite x, NaN for +-inf and NaN).
inline bool all_finite(__m256 x) {
  const __m256 eq = _mm256_cmp_ps(_mm256_sub_ps(x, x), _mm256_setzero_ps(), _CMP_EQ_OQ);
  return _mm256_movemask_ps(eq) == 0xFF;
}

// 32 int32 lanes in [-127, 127] (values 0-7, 8-15, 16-23, 24-31) to 32 bytes in order.
inline __m256i pack_bytes(__m256i q0, __m256i q1, __m256i q2, __m256i q3) {
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
  // p's dwords: q0[0-3] q1[0-3] q2[0-3] q3[0-3] | q0[4-7] q1[4-7] q2[4-7] q3[4-7]
  return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

}  // namespace

void quantize_activations_avx2(const float* x, int M, int64_t n_in, const QuantizedActs& out) {
  for (int r = 0; r < M; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * n_in;        // (n_in)
    const QuantizedActs row = acts_from_row(out, r);
    int8_t* ar = row.values;  // (n_pad)
    for (int64_t b = 0; b < n_in; b += 32) {
      __m256 xv[4];  // (4, 8) the block's 32 values
      for (int k = 0; k < 4; ++k) xv[k] = _mm256_loadu_ps(xr + b + 8 * k);
      const bool finite = all_finite(xv[0]) && all_finite(xv[1]) && all_finite(xv[2]) && all_finite(xv[3]);
      const float amax = max_lanes(_mm256_max_ps(_mm256_max_ps(abs_ps(xv[0]), abs_ps(xv[1])),
                                                 _mm256_max_ps(abs_ps(xv[2]), abs_ps(xv[3]))));
      float d = amax / 127.0f;
      const float inv_d = (finite && d > 0.0f) ? 1.0f / d : 0.0f;
      if (!finite) d = __builtin_nanf("");
      const __m256 inv = _mm256_set1_ps(inv_d);
      __m256i q[4];  // a block with a non-finite value: zeros
      for (int k = 0; k < 4; ++k) q[k] = finite ? quantize8(xv[k], inv) : _mm256_setzero_si256();
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(ar + b), pack_bytes(q[0], q[1], q[2], q[3]));
      const int sum0 = sum_lanes(_mm256_add_epi32(q[0], q[1])), sum1 = sum_lanes(_mm256_add_epi32(q[2], q[3]));
      store_block_terms(row, b / 32, d, sum0, sum1);
    }
    zero_act_padding(row, n_in);
  }
}

}  // namespace specdec::matmul_detail
