// kernels/rowops_avx512.cpp — AVX-512 swiglu (contract: rowops_impl.h), 16 elements at a time;
// the tail goes through the scalar twin, which gives the same bits.
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 AVX-512 headers (bug 105593)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/exp_nonpositive.h"
#include "kernels/rowops_impl.h"

namespace specdec::kernels_detail {

void swiglu_avx512(const float* gate, const float* up, int n, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps(), sign = _mm512_set1_ps(-0.0f);
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 t = exp_nonpositive(_mm512_or_ps(g, sign));  // exp(-|g|)
    const __m512 num = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(g, zero, _CMP_GE_OQ), t, one);
    const __m512 s = _mm512_div_ps(num, _mm512_add_ps(one, t));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_mul_ps(g, s), _mm512_loadu_ps(up + i)));
  }
  if (i < n) swiglu_scalar(gate + i, up + i, n - i, out + i);
}

}  // namespace specdec::kernels_detail
