// kernels/rowops_avx2.cpp — AVX2 swiglu (contract: rowops_impl.h), 8 elements at a time; the
// tail goes through the scalar twin, which gives the same bits.
#include <immintrin.h>

#include "kernels/exp_nonpositive.h"
#include "kernels/rowops_impl.h"

namespace specdec::kernels_detail {

void swiglu_avx2(const float* gate, const float* up, int n, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 t = exp_nonpositive(_mm256_or_ps(g, sign));  // exp(-|g|)
    const __m256 num = _mm256_blendv_ps(t, one, _mm256_cmp_ps(g, zero, _CMP_GE_OQ));
    const __m256 s = _mm256_div_ps(num, _mm256_add_ps(one, t));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(g, s), _mm256_loadu_ps(up + i)));
  }
  if (i < n) swiglu_scalar(gate + i, up + i, n - i, out + i);
}

}  // namespace specdec::kernels_detail
