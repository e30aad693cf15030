// kernels/attention_avx512.cpp — attention's inner loops for AVX-512 machines, with the AVX2
// loops' bits (attention_avx2.cpp): the same 8-lane vectors, FMA chains and reduction tree
// per (query, key) pair, but with AVX-512VL's 32 vector registers the operands a pair shares
// with its neighbours are held in registers instead of reloaded from L1.
//   Scores: the AVX2 loop reloads all 8 keys' slices for every query (9 loads per 8 FMAs,
//   bound by the load ports); here 2 keys (16 vectors of a 64-float head) stay in registers
//   while 4 queries at a time stream past them (0.5 loads per FMA).
//   Weighted sums: 3 queries' 64 running outputs (24 vectors) in registers, so each value
//   vector is loaded once for 3 queries (11 loads per 24 FMAs instead of 9 per 8).
// Only head_dim = 64 (the common small-model head) takes these paths; other head sizes call
// the AVX2 loops, so every shape gives the AVX2 bits on AVX-512 machines.
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 AVX-512 headers (bug 105593)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/attention_impl.h"
#include "kernels/attention_simd8.h"

namespace specdec::attention_detail {

namespace {

constexpr int kHead = 64;                 // head_dim of the blocked paths
constexpr int kVecs = kHead / 8;          // 8-float vectors per head slice
constexpr int kScoreKeys = 2;             // keys held in registers by the score loop
constexpr int kScoreQueries = 4;          // queries per pass over them
constexpr int kSumQueries = 3;            // queries whose outputs the weighted sum holds

// Scores of queries [i0, i0 + n) (n <= kScoreQueries) against the keys held in k: per pair one
// accumulator, lane l summing d = l, l + 8, ... in order from zero (the AVX2 chain).
template <int NK>
inline void score_queries(const float* q, int i0, int n, const __m256 (&k)[kScoreKeys][kVecs], float scale,
                          float* scores, size_t score_stride) {
  __m256 acc[8];  // acc[i * NK + j]: query i0 + i, key j (unused entries stay zero)
  #pragma GCC unroll 8
  for (int a = 0; a < 8; ++a) acc[a] = _mm256_setzero_ps();
  #pragma GCC unroll 8
  for (int v = 0; v < kVecs; ++v) {
    #pragma GCC unroll 4
    for (int i = 0; i < kScoreQueries; ++i) {
      if (i >= n) break;
      const __m256 qv = _mm256_loadu_ps(q + static_cast<size_t>(i0 + i) * kHead + 8 * v);
      #pragma GCC unroll 2
      for (int j = 0; j < NK; ++j) acc[i * NK + j] = _mm256_fmadd_ps(qv, k[j][v], acc[i * NK + j]);
    }
  }
  const __m256 scaled = _mm256_mul_ps(horizontal_sums8(acc), _mm256_set1_ps(scale));
  static_assert(kScoreQueries == 4 && kScoreKeys == 2, "the paired stores below take 4 x 2 sums");
  if (NK == kScoreKeys && n == kScoreQueries) {
    // Lanes 2i, 2i + 1 are query i0 + i's scores of the two keys, adjacent in its score row:
    // four 8-byte stores (copying out through a stack array made a 9-row call at 4k keys 13%
    // slower: BENCHMARKS 24d). Partial passes keep the copy.
    const __m128 lo = _mm256_castps256_ps128(scaled), hi = _mm256_extractf128_ps(scaled, 1);
    float* row = scores + static_cast<size_t>(i0) * score_stride;
    _mm_storel_pi(reinterpret_cast<__m64*>(row), lo);
    _mm_storeh_pi(reinterpret_cast<__m64*>(row + score_stride), lo);
    _mm_storel_pi(reinterpret_cast<__m64*>(row + 2 * score_stride), hi);
    _mm_storeh_pi(reinterpret_cast<__m64*>(row + 3 * score_stride), hi);
    return;
  }
  alignas(32) float sums[8];
  _mm256_store_ps(sums, scaled);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < NK; ++j) scores[static_cast<size_t>(i0 + i) * score_stride + j] = sums[i * NK + j];
}

template <typename E>
void scores_head64(const float* q, int n_q, const E* const* keys, int n_keys, float scale, float* scores,
                   size_t score_stride) {
  for (int j0 = 0; j0 < n_keys; j0 += kScoreKeys) {
    const int nk = n_keys - j0 < kScoreKeys ? n_keys - j0 : kScoreKeys;
    __m256 k[kScoreKeys][kVecs];
    #pragma GCC unroll 2
    for (int j = 0; j < kScoreKeys; ++j) {
      const E* key = keys[j0 + (j < nk ? j : 0)];
      #pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) k[j][v] = load8(key + 8 * v);
    }
    for (int i0 = 0; i0 < n_q; i0 += kScoreQueries) {
      const int n = n_q - i0 < kScoreQueries ? n_q - i0 : kScoreQueries;
      if (nk == kScoreKeys) {
        score_queries<kScoreKeys>(q, i0, n, k, scale, scores + j0, score_stride);
      } else {
        score_queries<1>(q, i0, n, k, scale, scores + j0, score_stride);
      }
    }
  }
}

// out_i[0..64) += sum over keys in order of w_ij * values[j][0..64) for queries [i0, i0 + N):
// each output lane one FMA chain over the keys, from its current value (the AVX2 chain).
template <typename E, int N>
inline void sum_queries(const float* weights, size_t weight_stride, int i0, const E* const* values, int n_keys,
                        float* out) {
  __m256 o[N][kVecs];
  #pragma GCC unroll 3
  for (int i = 0; i < N; ++i) {
    #pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) o[i][v] = _mm256_loadu_ps(out + static_cast<size_t>(i0 + i) * kHead + 8 * v);
  }
  for (int j = 0; j < n_keys; ++j) {
    __m256 w[N];
    #pragma GCC unroll 3
    for (int i = 0; i < N; ++i) w[i] = _mm256_set1_ps(weights[static_cast<size_t>(i0 + i) * weight_stride + j]);
    const E* value = values[j];
    #pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) {
      const __m256 x = load8(value + 8 * v);
      #pragma GCC unroll 3
      for (int i = 0; i < N; ++i) o[i][v] = _mm256_fmadd_ps(w[i], x, o[i][v]);
    }
  }
  #pragma GCC unroll 3
  for (int i = 0; i < N; ++i) {
    #pragma GCC unroll 8
    for (int v = 0; v < kVecs; ++v) _mm256_storeu_ps(out + static_cast<size_t>(i0 + i) * kHead + 8 * v, o[i][v]);
  }
}

template <typename E>
void accumulate_head64(const float* weights, size_t weight_stride, int n_q, const E* const* values, int n_keys,
                       float* out) {
  int i0 = 0;
  for (; i0 + kSumQueries <= n_q; i0 += kSumQueries) sum_queries<E, kSumQueries>(weights, weight_stride, i0, values, n_keys, out);
  if (n_q - i0 == 2) sum_queries<E, 2>(weights, weight_stride, i0, values, n_keys, out);
  if (n_q - i0 == 1) sum_queries<E, 1>(weights, weight_stride, i0, values, n_keys, out);
}

}  // namespace

void scores_avx512(const float* q, int n_q, const float* const* keys, int n_keys, int head_dim, float scale,
                   float* scores, size_t score_stride) {
  if (head_dim != kHead) return scores_avx2(q, n_q, keys, n_keys, head_dim, scale, scores, score_stride);
  scores_head64(q, n_q, keys, n_keys, scale, scores, score_stride);
}

void scores_avx512_f16(const float* q, int n_q, const uint16_t* const* keys, int n_keys, int head_dim, float scale,
                       float* scores, size_t score_stride) {
  if (head_dim != kHead) return scores_avx2_f16(q, n_q, keys, n_keys, head_dim, scale, scores, score_stride);
  scores_head64(q, n_q, keys, n_keys, scale, scores, score_stride);
}

void accumulate_avx512(const float* weights, size_t weight_stride, int n_q, const float* const* values, int n_keys,
                       int head_dim, float* out) {
  if (head_dim != kHead) return accumulate_avx2(weights, weight_stride, n_q, values, n_keys, head_dim, out);
  accumulate_head64(weights, weight_stride, n_q, values, n_keys, out);
}

void accumulate_avx512_f16(const float* weights, size_t weight_stride, int n_q, const uint16_t* const* values,
                           int n_keys, int head_dim, float* out) {
  if (head_dim != kHead) return accumulate_avx2_f16(weights, weight_stride, n_q, values, n_keys, head_dim, out);
  accumulate_head64(weights, weight_stride, n_q, values, n_keys, out);
}

}  // namespace specdec::attention_detail
