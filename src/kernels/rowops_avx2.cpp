// kernels/rowops_avx2.cpp — AVX2 swiglu, rmsnorm and rope (contracts: rowops_impl.h), 8
// elements at a time; tails go through the scalar twins, which give the same bits.
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

double sum_squares_avx2(const float* x, int n) {
  __m256d acc[8];  // acc[k]: lanes 4k..4k+3
  for (__m256d& a : acc) a = _mm256_setzero_pd();
  int i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    #pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const __m256 v = _mm256_loadu_ps(x + i + 8 * q);
      const __m256 sq = _mm256_mul_ps(v, v);
      acc[2 * q] = _mm256_add_pd(acc[2 * q], _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
      acc[2 * q + 1] = _mm256_add_pd(acc[2 * q + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
    }
  }
  alignas(32) double lanes[kSumLanes];
  for (int k = 0; k < 8; ++k) _mm256_store_pd(lanes + 4 * k, acc[k]);
  return finish_sum_squares(lanes, x, i, n);
}

void rmsnorm_avx2(const float* x, const float* weight, int n, float eps, float* y) {
  const float scale = rms_scale(sum_squares_avx2(x, n), n, eps);
  const __m256 vscale = _mm256_set1_ps(scale);
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j), vscale), _mm256_loadu_ps(weight + j)));
  }
  for (; j < n; ++j) y[j] = (x[j] * scale) * weight[j];
}

void rope_apply_avx2(float* x, int n_heads, int head_dim, const float* cos_sin, const RopeParams& p) {
  const int n_pairs = p.n_rot / 2;
  const bool norm = p.layout == RopeLayout::Norm;
  for (int h = 0; h < n_heads; ++h) {
    float* head = x + static_cast<size_t>(h) * head_dim;
    int i = 0;
    if (norm) {  // 4 pairs (x0, x1) per vector, next to their (c, s)
      for (; i + 4 <= n_pairs; i += 4) {
        const __m256 v = _mm256_loadu_ps(head + 2 * i), cs = _mm256_loadu_ps(cos_sin + 2 * i);
        const __m256 a = _mm256_mul_ps(v, _mm256_moveldup_ps(cs));                           // x0 c, x1 c
        const __m256 b = _mm256_mul_ps(_mm256_permute_ps(v, 0xB1), _mm256_movehdup_ps(cs));  // x1 s, x0 s
        _mm256_storeu_ps(head + 2 * i, _mm256_addsub_ps(a, b));                              // even: a - b
      }
    } else {  // 8 pairs: x0 from the first half, x1 from the second
      for (; i + 8 <= n_pairs; i += 8) {
        const __m256 lo = _mm256_loadu_ps(cos_sin + 2 * i), hi = _mm256_loadu_ps(cos_sin + 2 * i + 8);
        // shuffle_ps works per 128-bit lane: c0 c1 c4 c5 | c2 c3 c6 c7, then the middle quadwords swap
        const __m256 c = _mm256_castpd_ps(_mm256_permute4x64_pd(
            _mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))), _MM_SHUFFLE(3, 1, 2, 0)));
        const __m256 s = _mm256_castpd_ps(_mm256_permute4x64_pd(
            _mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))), _MM_SHUFFLE(3, 1, 2, 0)));
        const __m256 x0 = _mm256_loadu_ps(head + i), x1 = _mm256_loadu_ps(head + i + n_pairs);
        _mm256_storeu_ps(head + i, _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s)));
        _mm256_storeu_ps(head + i + n_pairs, _mm256_add_ps(_mm256_mul_ps(x0, s), _mm256_mul_ps(x1, c)));
      }
    }
    rope_head_scalar(head, cos_sin, i, n_pairs, norm);
  }
}

}  // namespace specdec::kernels_detail
