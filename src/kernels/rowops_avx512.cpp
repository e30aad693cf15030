// kernels/rowops_avx512.cpp — AVX-512 swiglu, rmsnorm and rope (contracts: rowops_impl.h), 16
// elements at a time; tails go through the scalar twins, which give the same bits.
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

double sum_squares_avx512(const float* x, int n) {
  __m512d acc[4] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd()};
  int i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {  // acc[k]: lanes 8k..8k+7
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    const __m512 aa = _mm512_mul_ps(a, a), bb = _mm512_mul_ps(b, b);
    acc[0] = _mm512_add_pd(acc[0], _mm512_cvtps_pd(_mm512_castps512_ps256(aa)));
    acc[1] = _mm512_add_pd(acc[1], _mm512_cvtps_pd(_mm512_extractf32x8_ps(aa, 1)));
    acc[2] = _mm512_add_pd(acc[2], _mm512_cvtps_pd(_mm512_castps512_ps256(bb)));
    acc[3] = _mm512_add_pd(acc[3], _mm512_cvtps_pd(_mm512_extractf32x8_ps(bb, 1)));
  }
  alignas(64) double lanes[kSumLanes];
  for (int k = 0; k < 4; ++k) _mm512_store_pd(lanes + 8 * k, acc[k]);
  return finish_sum_squares(lanes, x, i, n);
}

void rmsnorm_avx512(const float* x, const float* weight, int n, float eps, float* y) {
  const float scale = rms_scale(sum_squares_avx512(x, n), n, eps);
  const __m512 vscale = _mm512_set1_ps(scale);
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    _mm512_storeu_ps(y + j, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + j), vscale), _mm512_loadu_ps(weight + j)));
  }
  for (; j < n; ++j) y[j] = (x[j] * scale) * weight[j];
}

void rope_apply_avx512(float* x, int n_heads, int head_dim, const float* cos_sin, const RopeParams& p) {
  const int n_pairs = p.n_rot / 2;
  const bool norm = p.layout == RopeLayout::Norm;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (int h = 0; h < n_heads; ++h) {
    float* head = x + static_cast<size_t>(h) * head_dim;
    int i = 0;
    if (norm) {  // 8 pairs (x0, x1) per vector, next to their (c, s)
      for (; i + 8 <= n_pairs; i += 8) {
        const __m512 v = _mm512_loadu_ps(head + 2 * i), cs = _mm512_loadu_ps(cos_sin + 2 * i);
        const __m512 a = _mm512_mul_ps(v, _mm512_moveldup_ps(cs));                              // x0 c, x1 c
        const __m512 b = _mm512_mul_ps(_mm512_permute_ps(v, 0xB1), _mm512_movehdup_ps(cs));     // x1 s, x0 s
        _mm512_storeu_ps(head + 2 * i, _mm512_mask_sub_ps(_mm512_add_ps(a, b), 0x5555, a, b));  // even: a - b
      }
    } else {  // 16 pairs: x0 from the first half, x1 from the second
      for (; i + 16 <= n_pairs; i += 16) {
        const __m512 lo = _mm512_loadu_ps(cos_sin + 2 * i), hi = _mm512_loadu_ps(cos_sin + 2 * i + 16);
        const __m512 c = _mm512_permutex2var_ps(lo, even, hi), s = _mm512_permutex2var_ps(lo, odd, hi);
        const __m512 x0 = _mm512_loadu_ps(head + i), x1 = _mm512_loadu_ps(head + i + n_pairs);
        _mm512_storeu_ps(head + i, _mm512_sub_ps(_mm512_mul_ps(x0, c), _mm512_mul_ps(x1, s)));
        _mm512_storeu_ps(head + i + n_pairs, _mm512_add_ps(_mm512_mul_ps(x0, s), _mm512_mul_ps(x1, c)));
      }
    }
    rope_head_scalar(head, cos_sin, i, n_pairs, norm);
  }
}

}  // namespace specdec::kernels_detail
