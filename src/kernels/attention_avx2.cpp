// kernels/attention_avx2.cpp — AVX2+FMA inner loops of attention (see attention_impl.h).
// Dot products: 8 lanes accumulated with FMA in index order, lanes reduced in a fixed tree,
// then the tail (head_dim % 8) added in order. Deterministic for a given head_dim.
#include <immintrin.h>

#include "kernels/attention_impl.h"

namespace specdec::attention_detail {

namespace {
float horizontal_sum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);                 // 4 lanes
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));        // 2 lanes
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 0x55)); // 1 lane
  return _mm_cvtss_f32(s);
}
}  // namespace

void scores_avx2(const float* q, int n_q, const float* k, int head_dim, float scale,
                 float* scores, size_t score_stride) {
  const int n_vec = head_dim / 8 * 8;
  for (int i = 0; i < n_q; ++i) {
    const float* qi = q + static_cast<size_t>(i) * head_dim;
    __m256 acc = _mm256_setzero_ps();
    for (int d = 0; d < n_vec; d += 8) {
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(qi + d), _mm256_loadu_ps(k + d), acc);
    }
    float sum = horizontal_sum(acc);
    for (int d = n_vec; d < head_dim; ++d) sum += qi[d] * k[d];
    scores[static_cast<size_t>(i) * score_stride] = sum * scale;
  }
}

void accumulate_avx2(const float* weights, size_t weight_stride, int n_q, const float* v,
                     int head_dim, float* out) {
  const int n_vec = head_dim / 8 * 8;
  for (int i = 0; i < n_q; ++i) {
    const float w = weights[static_cast<size_t>(i) * weight_stride];
    const __m256 wv = _mm256_set1_ps(w);
    float* oi = out + static_cast<size_t>(i) * head_dim;
    for (int d = 0; d < n_vec; d += 8) {
      _mm256_storeu_ps(oi + d, _mm256_fmadd_ps(wv, _mm256_loadu_ps(v + d), _mm256_loadu_ps(oi + d)));
    }
    for (int d = n_vec; d < head_dim; ++d) oi[d] += w * v[d];
  }
}

}  // namespace specdec::attention_detail
