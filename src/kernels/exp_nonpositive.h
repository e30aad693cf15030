// kernels/exp_nonpositive.h — exp(x) for x <= 0 as one sequence of float operations, written
// once per ISA (scalar, AVX2, AVX-512) so that every version gives the same bits: Cephes'
// single-precision polynomial on the reduced argument (relative error ~2 ulp against std::exp),
// x < -87.3 gives 0 (std::exp gives a denormal of at most 1.2e-38 there), NaN stays NaN.
//
// Operation order (each step rounds once; fnmadd(a, b, c) = fma(-a, b, c)):
//   fx = round_to_nearest_even(x * log2(e));  r = fnmadd(fx, c1, x);  r = fnmadd(fx, c2, r)
//   y = p0; y = fma(y, r, p_k) for p1..p5;  y = fma(y, r * r, r + 1)
//   result = x < -87.3 ? 0 : y * 2^max(fx, -126)   (max(a, b) = a > b ? a : b, as maxps)
// Everything is in an anonymous namespace: each translation unit (compiled with its own ISA
// flags) keeps its own copy, so the linker can never hand an AVX2 caller an AVX-512 body.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace specdec::kernels_detail {
namespace {

constexpr float kExpLog2e = 1.44269504088896341f;
constexpr float kExpC1 = 0.693359375f, kExpC2 = -2.12194440e-4f;
constexpr float kExpP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                            4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
constexpr float kExpZeroBelow = -87.3f;

inline float exp_nonpositive_scalar(float x) {
  const float fx = std::nearbyint(x * kExpLog2e);  // the default rounding: to nearest, ties to even
  float r = std::fma(-fx, kExpC1, x);
  r = std::fma(-fx, kExpC2, r);
  float y = kExpP[0];
  for (int k = 1; k < 6; ++k) y = std::fma(y, r, kExpP[k]);
  y = std::fma(y, r * r, r + 1.0f);
  const float e = fx > -126.0f ? fx : -126.0f;  // NaN -> -126, as maxps
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(e) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return x < kExpZeroBelow ? 0.0f : y * scale;
}

#if defined(__AVX2__)
inline __m256 exp_nonpositive(__m256 x) {
  const __m256 zero_mask = _mm256_cmp_ps(x, _mm256_set1_ps(kExpZeroBelow), _CMP_LT_OQ);
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kExpLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(kExpC1), x);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(kExpC2), r);
  __m256 y = _mm256_set1_ps(kExpP[0]);
  for (int k = 1; k < 6; ++k) y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(kExpP[k]));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(_mm256_max_ps(fx, _mm256_set1_ps(-126.0f))),
                                                       _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(zero_mask, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
}
#endif

#if defined(__AVX512F__)
inline __m512 exp_nonpositive(__m512 x) {
  const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpZeroBelow), _CMP_NLT_UQ);  // not (x < -87.3)
  const __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kExpLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(kExpC1), x);
  r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(kExpC2), r);
  __m512 y = _mm512_set1_ps(kExpP[0]);
  for (int k = 1; k < 6; ++k) y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(kExpP[k]));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(_mm512_max_ps(fx, _mm512_set1_ps(-126.0f))),
                                                       _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(keep, y, _mm512_castsi512_ps(e));
}
#endif

}  // namespace
}  // namespace specdec::kernels_detail
