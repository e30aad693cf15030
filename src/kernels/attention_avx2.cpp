// kernels/attention_avx2.cpp — AVX2+FMA inner loops of attention (see attention_impl.h).
// Dot products: 8 lanes accumulated with FMA in index order, lanes reduced in a fixed tree,
// then the tail (head_dim % 8) added in order. Weighted sums: out += w * v with one FMA per
// value, keys in order. Deterministic for a given head_dim, whatever n_q and n_keys.
// Cost per (query, key) pair: head_dim / 8 FMAs for the score and as many for the weighted
// sum. Scores go 8 keys at a time per query (8 independent FMA chains, one 8-key reduction);
// weighted sums keep 2 queries' 32 running outputs each in registers over the whole key block
// (8 chains, no load / store of the outputs per key, each value slice loaded once for both). A
// block's key and value slices stay in L1 while every query of the call reads them. F16 keys and
// values are converted (exactly, F16C) as they are loaded: the same bits as F32 rows holding
// the converted values, for half the bytes.
#include <immintrin.h>

#include <cstdint>

#include "kernels/attention_impl.h"
#include "kernels/attention_simd8.h"
#include "kernels/exp_nonpositive.h"
#include "specdec/kernels.h"

namespace specdec::attention_detail {

namespace {

using kernels_detail::exp_nonpositive;

inline float value_of(float x) { return x; }
inline float value_of(uint16_t h) { return fp16_to_f32(h); }

// Scores of every query against N <= 8 keys: per query one accumulator per key (lane l sums
// d = l, l + 8, ... in order), reduced for the 8 keys together, then the tail and the scale.
// The N key slices (N x head_dim values) stay in L1 across the queries.
template <typename E, int N>
void scores_group(const float* q, int n_q, const E* const* key_ptrs, int head_dim, float scale, float* scores,
                  size_t score_stride) {
  const E* keys[N];  // local copy: the stores below cannot alias it
  for (int j = 0; j < N; ++j) keys[j] = key_ptrs[j];
  const int n_vec = head_dim / 8 * 8;
  const __m256 scale_v = _mm256_set1_ps(scale);
  for (int i = 0; i < n_q; ++i) {
    const float* qi = q + static_cast<size_t>(i) * head_dim;
    __m256 acc[8];
    #pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
    for (int d = 0; d < n_vec; d += 8) {
      const __m256 qv = _mm256_loadu_ps(qi + d);
      #pragma GCC unroll 8
      for (int j = 0; j < N; ++j) acc[j] = _mm256_fmadd_ps(qv, load8(keys[j] + d), acc[j]);
    }
    const __m256 sums = horizontal_sums8(acc);
    float* out = scores + static_cast<size_t>(i) * score_stride;
    if (n_vec == head_dim && N == 8) {
      _mm256_storeu_ps(out, _mm256_mul_ps(sums, scale_v));
    } else {
      alignas(32) float lane[8];
      _mm256_store_ps(lane, sums);
      for (int j = 0; j < N; ++j) {
        float sum = lane[j];
        for (int d = n_vec; d < head_dim; ++d) sum += qi[d] * value_of(keys[j][d]);
        out[j] = sum * scale;
      }
    }
  }
}

// Calls of at most this many queries (a decode's 1-4 per kv head, a 2-row verify's) prefetch the
// K/V rows ahead into L2 (prefetch_l2). On the Zen 4 VM of BENCHMARKS 52, `SPECDEC_ISA=avx2
// specdec_microbench --threads=2 --benchmark_filter=attention/memory/` (the 1B shape's 16 layers
// at 4k keys) took 730-793 us per layer at M = 1 against 882-1162 without, but at M = 5 and 9
// (20 and 36 queries, whose passes consume keys more slowly) 1.03-1.05x as long.
constexpr int kPrefetchMaxQueries = 8;

// The weighted sums' register blocks: kSumQueries queries x kSumSlices 8-float output slices
// (8 of the 16 vector registers), so each value slice loaded serves 2 queries.
constexpr int kSumQueries = 2, kSumSlices = 4;  // accumulate_any's switch below names 1 and 2 queries

// For queries [0, Q) (weights w + i * weight_stride, outputs out + i * head_dim):
// out_i[d0 .. d0 + 8 S) += sum over the keys in order of w_ij * values[j][d0 ..]. Q x S output
// slices held in registers across all n_keys keys (one FMA chain per slice, one FMA per key),
// each value slice loaded once for the Q queries.
// ahead != 0: also asks for the row ahead bytes past each value row in L2 (row_bytes of it).
template <typename E, int Q, int S>
inline void accumulate_slices(const float* w, size_t weight_stride, const E* const* values, int n_keys, int d0,
                              float* out, int head_dim, uintptr_t ahead, int row_bytes) {
  __m256 o[Q][S];
  #pragma GCC unroll 2
  for (int i = 0; i < Q; ++i) {
    #pragma GCC unroll 8
    for (int s = 0; s < S; ++s) o[i][s] = _mm256_loadu_ps(out + static_cast<size_t>(i) * head_dim + d0 + 8 * s);
  }
  for (int j = 0; j < n_keys; ++j) {
    if (ahead != 0) prefetch_l2(reinterpret_cast<uintptr_t>(values[j]) + ahead, row_bytes);
    const E* v = values[j] + d0;
    __m256 x[S];
    #pragma GCC unroll 8
    for (int s = 0; s < S; ++s) x[s] = load8(v + 8 * s);
    #pragma GCC unroll 2
    for (int i = 0; i < Q; ++i) {
      const __m256 wv = _mm256_set1_ps(w[static_cast<size_t>(i) * weight_stride + j]);
      #pragma GCC unroll 8
      for (int s = 0; s < S; ++s) o[i][s] = _mm256_fmadd_ps(wv, x[s], o[i][s]);
    }
  }
  #pragma GCC unroll 2
  for (int i = 0; i < Q; ++i) {
    #pragma GCC unroll 8
    for (int s = 0; s < S; ++s) _mm256_storeu_ps(out + static_cast<size_t>(i) * head_dim + d0 + 8 * s, o[i][s]);
  }
}

// accumulate_slices for 1..kSumSlices slices, chosen at run time.
template <typename E, int Q>
inline void accumulate_block(const float* w, size_t weight_stride, const E* const* values, int n_keys, int d0,
                             int slices, float* out, int head_dim, uintptr_t ahead, int row_bytes) {
  static_assert(kSumSlices == 4, "one case per slice count");
  switch (slices) {
    case 1: return accumulate_slices<E, Q, 1>(w, weight_stride, values, n_keys, d0, out, head_dim, ahead, row_bytes);
    case 2: return accumulate_slices<E, Q, 2>(w, weight_stride, values, n_keys, d0, out, head_dim, ahead, row_bytes);
    case 3: return accumulate_slices<E, Q, 3>(w, weight_stride, values, n_keys, d0, out, head_dim, ahead, row_bytes);
    default: return accumulate_slices<E, Q, 4>(w, weight_stride, values, n_keys, d0, out, head_dim, ahead, row_bytes);
  }
}

template <typename E>
void scores_any(const float* q, int n_q, const E* const* keys, int n_keys, int head_dim, float scale, float* scores,
                size_t score_stride) {
  const int row_bytes = head_dim * static_cast<int>(sizeof(E));
  const bool prefetch = n_q <= kPrefetchMaxQueries;
  for (int j = 0; j < n_keys; j += 8) {
    const E* const* k = keys + j;
    float* s = scores + j;
    for (int a = j + kPrefetchKeysAhead; prefetch && a < j + kPrefetchKeysAhead + 8 && a < n_keys; ++a)
      prefetch_l2(reinterpret_cast<uintptr_t>(keys[a]), row_bytes);
    switch (n_keys - j < 8 ? n_keys - j : 8) {
      case 1: scores_group<E, 1>(q, n_q, k, head_dim, scale, s, score_stride); break;
      case 2: scores_group<E, 2>(q, n_q, k, head_dim, scale, s, score_stride); break;
      case 3: scores_group<E, 3>(q, n_q, k, head_dim, scale, s, score_stride); break;
      case 4: scores_group<E, 4>(q, n_q, k, head_dim, scale, s, score_stride); break;
      case 5: scores_group<E, 5>(q, n_q, k, head_dim, scale, s, score_stride); break;
      case 6: scores_group<E, 6>(q, n_q, k, head_dim, scale, s, score_stride); break;
      case 7: scores_group<E, 7>(q, n_q, k, head_dim, scale, s, score_stride); break;
      default: scores_group<E, 8>(q, n_q, k, head_dim, scale, s, score_stride); break;
    }
  }
}

// Per query: 64 output values at a time in registers over all the keys, then the tail values
// (head_dim % 8) key by key; every output value gets one FMA per key, keys in order.
template <typename E>
void accumulate_any(const float* weights, size_t weight_stride, int n_q, const E* const* values, int n_keys,
                    int head_dim, float* out) {
  const int n_vec = head_dim / 8 * 8, row_bytes = head_dim * static_cast<int>(sizeof(E));
  // the first queries' first pass prefetches
  const uintptr_t ahead = n_q <= kPrefetchMaxQueries ? rows_ahead(values, n_keys) : 0;
  for (int i0 = 0; i0 < n_q; i0 += kSumQueries) {
    const int n = n_q - i0 < kSumQueries ? n_q - i0 : kSumQueries;
    const float* wi = weights + static_cast<size_t>(i0) * weight_stride;
    float* oi = out + static_cast<size_t>(i0) * head_dim;
    for (int d0 = 0; d0 < n_vec; d0 += 8 * kSumSlices) {
      const uintptr_t a = i0 == 0 && d0 == 0 ? ahead : 0;
      const int slices = (n_vec - d0) / 8 < kSumSlices ? (n_vec - d0) / 8 : kSumSlices;
      if (n == 2) {
        accumulate_block<E, 2>(wi, weight_stride, values, n_keys, d0, slices, oi, head_dim, a, row_bytes);
      } else {
        accumulate_block<E, 1>(wi, weight_stride, values, n_keys, d0, slices, oi, head_dim, a, row_bytes);
      }
    }
    if (n_vec == head_dim) continue;
    for (int i = i0; i < i0 + n; ++i) {
      const float* w = weights + static_cast<size_t>(i) * weight_stride;
      float* o = out + static_cast<size_t>(i) * head_dim;
      for (int j = 0; j < n_keys; ++j)
        for (int d = n_vec; d < head_dim; ++d) o[d] += w[j] * value_of(values[j][d]);
    }
  }
}

}  // namespace

// Max (exact), exp of each value minus it (exp_nonpositive.h), sum in double (4 + 4 lanes, then
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
  const double sum = softmax_sum_and_tail(_mm256_add_pd(s0, s1), x, n_vec, n, max_value);
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
