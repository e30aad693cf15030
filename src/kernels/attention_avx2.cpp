// kernels/attention_avx2.cpp — AVX2+FMA inner loops of attention (see attention_impl.h).
// Dot products: 8 lanes accumulated with FMA in index order, lanes reduced in a fixed tree,
// then the tail (head_dim % 8) added in order. Weighted sums: out += w * v with one FMA per
// value, keys in order. Deterministic for a given head_dim, whatever n_q and n_keys.
// Cost per (query, key) pair: head_dim / 8 FMAs for the score and as many for the weighted
// sum; a query's 8-float slices are loaded once per block of keys (and its running output
// loaded and stored once per block), which is what keeps the FMA units busy. F16 keys and
// values are converted (exactly, F16C) as they are loaded: the same bits as F32 rows holding
// the converted values, for half the bytes.
#include <immintrin.h>

#include <cstdint>

#include "kernels/attention_impl.h"
#include "specdec/kernels.h"

namespace specdec::attention_detail {

namespace {

// 8 keys or values from F32 or F16 storage (the F16 conversion is exact).
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline float value_of(float x) { return x; }
inline float value_of(uint16_t h) { return fp16_to_f32(h); }

float horizontal_sum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);                 // 4 lanes
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));        // 2 lanes
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 0x55)); // 1 lane
  return _mm_cvtss_f32(s);
}

// Scores of queries [i0, i0 + Q) against N keys: one accumulator per (query, key), so each
// key slice loaded serves Q queries and each query slice N keys.
template <typename E, int Q, int N>
inline void scores_tile(const float* q, int i0, const E* const* keys, int head_dim, float scale, float* scores,
                        size_t score_stride) {
  const int n_vec = head_dim / 8 * 8;
  __m256 acc[Q][N];
  #pragma GCC unroll 8
  for (int i = 0; i < Q; ++i)
    #pragma GCC unroll 4
    for (int j = 0; j < N; ++j) acc[i][j] = _mm256_setzero_ps();
  for (int d = 0; d < n_vec; d += 8) {
    __m256 kv[N];
    #pragma GCC unroll 4
    for (int j = 0; j < N; ++j) kv[j] = load8(keys[j] + d);
    #pragma GCC unroll 8
    for (int i = 0; i < Q; ++i) {
      const __m256 qv = _mm256_loadu_ps(q + static_cast<size_t>(i0 + i) * head_dim + d);
      #pragma GCC unroll 4
      for (int j = 0; j < N; ++j) acc[i][j] = _mm256_fmadd_ps(qv, kv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < Q; ++i) {
    const float* qi = q + static_cast<size_t>(i0 + i) * head_dim;
    for (int j = 0; j < N; ++j) {
      float sum = horizontal_sum(acc[i][j]);
      for (int d = n_vec; d < head_dim; ++d) sum += qi[d] * value_of(keys[j][d]);
      scores[static_cast<size_t>(i0 + i) * score_stride + j] = sum * scale;
    }
  }
}

template <typename E, int N>
void scores_block(const float* q, int n_q, const E* const* key_ptrs, int head_dim, float scale, float* scores,
                  size_t score_stride) {
  const E* keys[N];  // local copy: the stores below cannot alias it
  for (int j = 0; j < N; ++j) keys[j] = key_ptrs[j];
  int i = 0;
  for (; i + 2 <= n_q; i += 2) scores_tile<E, 2, N>(q, i, keys, head_dim, scale, scores, score_stride);
  if (i < n_q) scores_tile<E, 1, N>(q, i, keys, head_dim, scale, scores, score_stride);
}

// out_i += sum over the N keys in order of w_ij * v_j for queries [i0, i0 + Q): each value slice
// loaded serves Q queries; each output slice is loaded and stored once per block of keys.
template <typename E, int Q, int N>
inline void accumulate_tile(const float* weights, size_t weight_stride, int i0, const E* const* values,
                            int head_dim, float* out) {
  const int n_vec = head_dim / 8 * 8;
  __m256 wv[Q][N];
  #pragma GCC unroll 8
  for (int i = 0; i < Q; ++i)
    #pragma GCC unroll 4
    for (int j = 0; j < N; ++j) wv[i][j] = _mm256_set1_ps(weights[static_cast<size_t>(i0 + i) * weight_stride + j]);
  for (int d = 0; d < n_vec; d += 8) {
    __m256 o[Q];
    #pragma GCC unroll 8
    for (int i = 0; i < Q; ++i) o[i] = _mm256_loadu_ps(out + static_cast<size_t>(i0 + i) * head_dim + d);
    #pragma GCC unroll 4
    for (int j = 0; j < N; ++j) {
      const __m256 vv = load8(values[j] + d);
      #pragma GCC unroll 8
      for (int i = 0; i < Q; ++i) o[i] = _mm256_fmadd_ps(wv[i][j], vv, o[i]);
    }
    #pragma GCC unroll 8
    for (int i = 0; i < Q; ++i) _mm256_storeu_ps(out + static_cast<size_t>(i0 + i) * head_dim + d, o[i]);
  }
  for (int i = 0; i < Q; ++i) {
    const float* wi = weights + static_cast<size_t>(i0 + i) * weight_stride;
    float* oi = out + static_cast<size_t>(i0 + i) * head_dim;
    for (int j = 0; j < N; ++j)
      for (int d = n_vec; d < head_dim; ++d) oi[d] += wi[j] * value_of(values[j][d]);
  }
}

template <typename E, int N>
void accumulate_block(const float* weights, size_t weight_stride, int n_q, const E* const* value_ptrs,
                      int head_dim, float* out) {
  const E* values[N];  // local copy: the stores below cannot alias it
  for (int j = 0; j < N; ++j) values[j] = value_ptrs[j];
  int i = 0;
  for (; i + 2 <= n_q; i += 2) accumulate_tile<E, 2, N>(weights, weight_stride, i, values, head_dim, out);
  if (i < n_q) accumulate_tile<E, 1, N>(weights, weight_stride, i, values, head_dim, out);
}

template <typename E>
void scores_any(const float* q, int n_q, const E* const* keys, int n_keys, int head_dim, float scale, float* scores,
                size_t score_stride) {
  switch (n_keys) {
    case 1: scores_block<E, 1>(q, n_q, keys, head_dim, scale, scores, score_stride); break;
    case 2: scores_block<E, 2>(q, n_q, keys, head_dim, scale, scores, score_stride); break;
    case 3: scores_block<E, 3>(q, n_q, keys, head_dim, scale, scores, score_stride); break;
    default: scores_block<E, kKeyBlock>(q, n_q, keys, head_dim, scale, scores, score_stride); break;
  }
}

template <typename E>
void accumulate_any(const float* weights, size_t weight_stride, int n_q, const E* const* values, int n_keys,
                    int head_dim, float* out) {
  switch (n_keys) {
    case 1: accumulate_block<E, 1>(weights, weight_stride, n_q, values, head_dim, out); break;
    case 2: accumulate_block<E, 2>(weights, weight_stride, n_q, values, head_dim, out); break;
    case 3: accumulate_block<E, 3>(weights, weight_stride, n_q, values, head_dim, out); break;
    default: accumulate_block<E, kKeyBlock>(weights, weight_stride, n_q, values, head_dim, out); break;
  }
}

// exp(x) for x <= 0 (scores minus their maximum), Cephes' single-precision polynomial on the
// reduced argument (relative error ~2 ulp); x < -87.3 gives 0 (std::exp gives a denormal of at
// most 1.2e-38 there), NaN stays NaN.
__m256 exp_nonpositive(__m256 x) {
  const __m256 zero_mask = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^fx from the exponent bits; fx >= -126 where the result is kept
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(_mm256_max_ps(fx, _mm256_set1_ps(-126.0f))),
                                                       _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(zero_mask, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
}

}  // namespace

// Max (exact), exp of each value minus it (exp_nonpositive), sum in double (4 + 4 lanes, then
// a fixed tree, then the tail in order), one multiply by 1 / sum. All n values NaN if one is.
void softmax_avx2(float* x, int n) {
  if (n <= 0) return;
  const int n_vec = n / 8 * 8;
  float max_value = x[0];
  if (n_vec > 0) {
    __m256 m = _mm256_loadu_ps(x);
    __m256 has_nan = _mm256_cmp_ps(m, m, _CMP_UNORD_Q);
    for (int i = 8; i < n_vec; i += 8) {
      const __m256 v = _mm256_loadu_ps(x + i);
      has_nan = _mm256_or_ps(has_nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
      m = _mm256_max_ps(m, v);
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    max_value = _mm_cvtss_f32(h);
    if (_mm256_movemask_ps(has_nan) != 0) max_value = _mm256_cvtss_f32(_mm256_set1_ps(__builtin_nanf("")));
  }
  for (int i = n_vec; i < n; ++i) max_value = x[i] > max_value || x[i] != x[i] ? x[i] : max_value;
  const __m256 mv = _mm256_set1_ps(max_value);
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  for (int i = 0; i < n_vec; i += 8) {
    const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
    _mm256_storeu_ps(x + i, e);
    s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  const __m256d s = _mm256_add_pd(s0, s1);
  const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
  double sum = _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
  for (int i = n_vec; i < n; ++i) {
    alignas(32) float lane[8] = {x[i] - max_value};
    x[i] = _mm256_cvtss_f32(exp_nonpositive(_mm256_load_ps(lane)));
    sum += static_cast<double>(x[i]);
  }
  const __m256 inv_sum = _mm256_set1_ps(static_cast<float>(1.0 / sum));
  for (int i = 0; i < n_vec; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv_sum));
  for (int i = n_vec; i < n; ++i) x[i] *= _mm256_cvtss_f32(inv_sum);
}

void scores_avx2(const float* q, int n_q, const float* const* keys, int n_keys, int head_dim, float scale,
                 float* scores, size_t score_stride) {
  scores_any(q, n_q, keys, n_keys, head_dim, scale, scores, score_stride);
}

void scores_avx2_f16(const float* q, int n_q, const uint16_t* const* keys, int n_keys, int head_dim, float scale,
                     float* scores, size_t score_stride) {
  scores_any(q, n_q, keys, n_keys, head_dim, scale, scores, score_stride);
}

void accumulate_avx2(const float* weights, size_t weight_stride, int n_q, const float* const* values, int n_keys,
                     int head_dim, float* out) {
  accumulate_any(weights, weight_stride, n_q, values, n_keys, head_dim, out);
}

void accumulate_avx2_f16(const float* weights, size_t weight_stride, int n_q, const uint16_t* const* values,
                         int n_keys, int head_dim, float* out) {
  accumulate_any(weights, weight_stride, n_q, values, n_keys, head_dim, out);
}

}  // namespace specdec::attention_detail
