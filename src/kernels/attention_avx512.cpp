// kernels/attention_avx512.cpp — attention's inner loops for AVX-512 machines, with the AVX2
// loops' bits (attention_avx2.cpp): the same 8-lane FMA chains and reduction tree per (query,
// key) pair, two chains to a 16-lane vector, and with 32 vector registers the operands a pair
// shares with its neighbours held in registers instead of reloaded from L1.
//   Scores: the AVX2 loop reloads all 8 keys' slices for every query (9 loads per 8 FMAs,
//   bound by the load ports); here 4 keys (16 vectors: two keys side by side in each) stay in
//   registers while 4 queries at a time stream past them (one load per 2 FMAs, of the query's
//   slices duplicated once per call), and the 16 sums of a pass are reduced together
//   (horizontal_sums16: ~20 instructions). Groups of 16 queries (a verify of 4+ rows, a
//   prefill) with F32 keys instead hold one query per lane (scores_lanes): the chains' tree is
//   then 7 vertical adds per 16 pairs, and a 32-query call takes ~0.8x the time.
//   Weighted sums: 6 queries' 64 running outputs (24 vectors) in registers, so each value
//   row is loaded once for 6 queries (8 256-bit loads per 24 FMAs).
// On full-width AVX-512 cores (Zen 5) the 16-lane vectors halve the instructions: a 9-row
// call of the 1B shape over 4k cached keys took 0.68x the time of the 8-lane loops, and 0.80x
// for the 150M shape with K/V streaming from memory (2 threads; BENCHMARKS 25b).
// Only head_dim = 64 (the common small-model head) takes these paths; other head sizes call
// the AVX2 loops, so every shape gives the AVX2 bits on AVX-512 machines.
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 AVX-512 headers (bug 105593)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "kernels/attention_impl.h"
#include "kernels/attention_simd8.h"
#include "kernels/exp_nonpositive.h"

namespace specdec::attention_detail {

using kernels_detail::exp_nonpositive;

namespace {

constexpr int kHead = 64;         // head_dim of the blocked paths
constexpr int kVecs = kHead / 8;  // 8-float slices per head
constexpr int kScorePairs = 2;    // key pairs held in registers by the score loop (4 keys)
constexpr int kScoreQueries = 4;  // queries per pass over them
constexpr int kSumQueries = 6;    // queries whose outputs the weighted sum holds

// Two rows side by side: lanes 0-7 from a, 8-15 from b. K/V rows are read with 256-bit loads:
// with 512-bit loads a 1-row call over 4k keys streaming from memory took 1.3-1.4x as long on
// Zen 5 (specdec_microbench, BENCHMARKS 25b), though the same from L3.
inline __m512 load_pair(const float* a, const float* b) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(a)), _mm256_loadu_ps(b), 1);
}
inline __m512 load_pair(const uint16_t* a, const uint16_t* b) {  // the F16 conversion is exact
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1));
}
inline __m512 load16(const float* p) { return load_pair(p, p + 8); }
inline __m512 load16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

// Asks for a K or V row's cache lines in L2 (a hint: no fault, no effect on results). The first
// pass over a call's keys asks for those kPrefetchKeysAhead ahead, over its values for the next
// call's. When a layer's K/V come from L3 or memory, the hardware prefetchers alone leave that pass waiting: at
// 4k keys of the 1B shape, 36 queries, one thread, a kv head's scores (scores_lanes) took 277-287
// us with no prefetch against 233-237 with it, its weighted sums 212-219 us against 193-199 (into
// L1 instead: 225); a decode's attention over 16 such layers (2 threads) 0.86x as long, its whole
// 4k-context decode 0.95x (BENCHMARKS 52b).
template <typename E>
[[gnu::always_inline]] inline void prefetch_row_l2(const E* row) {
  prefetch_l2(reinterpret_cast<uintptr_t>(row), static_cast<int>(kHead * sizeof(E)));
}

// The 16 sums [query i][key j] at lane 4i + j, unscaled, of acc[p][i] (query i against keys
// 2p, 2p + 1 in its 256-bit halves), each 8-lane half reduced by the AVX2 loop's tree
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) (horizontal_sums8), four 128-bit blocks at a
// time: the halves of query i's four vectors, added; then the unpack and shuffle stages, which
// leave key j in block j, lane i; then one permute to query-major order.
inline __m512 horizontal_sums16(const __m512 (&acc)[kScorePairs][kScoreQueries]) {
  static_assert(kScorePairs == 2 && kScoreQueries == 4, "4 queries x 4 keys");
  __m512 s[kScoreQueries];  // s[i] block j: query i, key j: lanes l_k + l_k+4
  #pragma GCC unroll 4
  for (int i = 0; i < kScoreQueries; ++i) {
    s[i] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[0][i], acc[1][i], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(acc[0][i], acc[1][i], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  const __m512 p = _mm512_add_ps(_mm512_unpacklo_ps(s[0], s[1]), _mm512_unpackhi_ps(s[0], s[1]));
  const __m512 q = _mm512_add_ps(_mm512_unpacklo_ps(s[2], s[3]), _mm512_unpackhi_ps(s[2], s[3]));
  const __m512 by_key = _mm512_add_ps(_mm512_shuffle_ps(p, q, _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(p, q, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512i to_query_major = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(to_query_major, by_key);
}

// Scores of queries [i0, i0 + n) (n <= kScoreQueries; q as scores_chunk's) against the 4 keys
// held in k (k[p][v]: slice v of keys 2p and 2p + 1 in the two 256-bit halves), written for the
// first nk of them. Per (query, key) one 8-lane accumulator (half a vector), lane l summing
// d = l, l + 8, ... in order from zero (the AVX2 chain), then the AVX2 loop's reduction tree
// (horizontal_sums16).
template <bool kDup>
inline void score_queries(const float* q, int i0, int n, const __m512 (&k)[kScorePairs][kVecs], int nk, float scale,
                          float* scores, size_t score_stride) {
  __m512 acc[kScorePairs][kScoreQueries];  // query i0 + i against keys 2p, 2p + 1 (unused: zero)
  #pragma GCC unroll 2
  for (int p = 0; p < kScorePairs; ++p) {
    #pragma GCC unroll 4
    for (int i = 0; i < kScoreQueries; ++i) acc[p][i] = _mm512_setzero_ps();
  }
  #pragma GCC unroll 8
  for (int v = 0; v < kVecs; ++v) {
    #pragma GCC unroll 4
    for (int i = 0; i < kScoreQueries; ++i) {
      if (i >= n) break;
      const __m512 qv = kDup ? _mm512_load_ps(q + (static_cast<size_t>(i0 + i) * kVecs + v) * 16)
                             : _mm512_broadcast_f32x8(_mm256_loadu_ps(q + static_cast<size_t>(i0 + i) * kHead + 8 * v));
      #pragma GCC unroll 2
      for (int p = 0; p < kScorePairs; ++p) acc[p][i] = _mm512_fmadd_ps(qv, k[p][v], acc[p][i]);
    }
  }
  const __m512 scaled = _mm512_mul_ps(horizontal_sums16(acc), _mm512_set1_ps(scale));  // lane 4i + j
  float* row = scores + static_cast<size_t>(i0) * score_stride;
  if (nk == 2 * kScorePairs) {  // each query's 4 scores are adjacent in its row: one store each
    _mm_storeu_ps(row, _mm512_castps512_ps128(scaled));
    if (n > 1) _mm_storeu_ps(row + score_stride, _mm512_extractf32x4_ps(scaled, 1));
    if (n > 2) _mm_storeu_ps(row + 2 * score_stride, _mm512_extractf32x4_ps(scaled, 2));
    if (n > 3) _mm_storeu_ps(row + 3 * score_stride, _mm512_extractf32x4_ps(scaled, 3));
    return;
  }
  alignas(64) float sums[16];
  _mm512_store_ps(sums, scaled);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < nk; ++j) row[static_cast<size_t>(i) * score_stride + j] = sums[4 * i + j];
}

// Queries [0, n_q) against all n_keys keys, 4 keys at a time. q: (n_q, kHead); or with kDup,
// each query's 8-float slices written twice into 16-lane vectors ((n_q, kVecs, 16)), which a
// pass loads with plain 64-byte loads instead of one vbroadcastf32x8 per slice and pass.
// kPrefetch: the first pass over the call's keys (not after scores_lanes, which read them) also
// asks for the keys kPrefetchKeysAhead ahead in L2.
template <bool kDup, bool kPrefetch, typename E>
void scores_chunk(const float* q, int n_q, const E* const* keys, int n_keys, float scale, float* scores,
                  size_t score_stride) {
  constexpr int kKeys = 2 * kScorePairs;
  for (int j0 = 0; j0 < n_keys; j0 += kKeys) {
    const int nk = n_keys - j0 < kKeys ? n_keys - j0 : kKeys;
    if (kPrefetch && j0 + kPrefetchKeysAhead + kKeys <= n_keys)
      for (int j = 0; j < kKeys; ++j) prefetch_row_l2(keys[j0 + kPrefetchKeysAhead + j]);
    __m512 k[kScorePairs][kVecs];  // past nk: key j0 again (its scores are not written)
    #pragma GCC unroll 2
    for (int p = 0; p < kScorePairs; ++p) {
      const E* a = keys[j0 + (2 * p < nk ? 2 * p : 0)];
      const E* b = keys[j0 + (2 * p + 1 < nk ? 2 * p + 1 : 0)];
      #pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) k[p][v] = load_pair(a + 8 * v, b + 8 * v);
    }
    for (int i0 = 0; i0 < n_q; i0 += kScoreQueries) {
      const int n = n_q - i0 < kScoreQueries ? n_q - i0 : kScoreQueries;
      score_queries<kDup>(q, i0, n, k, nk, scale, scores + j0, score_stride);
    }
  }
}

// ---- Scores with 16 queries in the lanes (groups of 16 queries: a verify of 4+ rows of a
// 4-head group, a prefill). Per (query, key) the same arithmetic as above: eight chains, chain c
// summing q[d] * k[d] for d = c, c + 8, ... in order from zero (FMAs), then the tree
// ((c0 + c4) + (c2 + c6)) + ((c1 + c5) + (c3 + c7)) and the scale. Here the chains are whole
// vectors (lane i: query i) and k[d] a broadcast memory operand, so a pair's 64 FMAs come with
// 7 vertical adds and no horizontal reduction; the loop above spends ~21 shuffles and adds per
// 64 FMAs on its reduction and operand inserts. Costs per 16 keys of a group: one 16 x 16
// transpose (the results to query rows); per call, of up to kScoreKeyBlock keys, another 4 (the
// queries to lanes).

constexpr int kLaneQueries = 16;
// A call's last queries past its groups of 16 take scores_lanes in a partly filled group when
// they are at least this many, else the loop above (a 16-lane group costs the same at any fill:
// ~88 us per 4096 keys on one thread, where the loop above takes ~6.6-9 us per query).
constexpr int kLanePartialMin = 12;

// r[i] lane j -> r[j] lane i (unpacks within 128-bit lanes, then a 4 x 4 transpose of the lanes).
inline void transpose16(__m512 (&r)[16]) {
  __m512 t[16];
  #pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  auto lo = [](__m512 a, __m512 b) {
    return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
  };
  auto hi = [](__m512 a, __m512 b) {
    return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
  };
  #pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {  // r[4k + m] 128-bit lane L: rows 4k..4k+3 of column 4L + m
    r[4 * k] = lo(t[4 * k], t[4 * k + 2]);
    r[4 * k + 1] = hi(t[4 * k], t[4 * k + 2]);
    r[4 * k + 2] = lo(t[4 * k + 1], t[4 * k + 3]);
    r[4 * k + 3] = hi(t[4 * k + 1], t[4 * k + 3]);
  }
  #pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    const __m512 u0 = _mm512_shuffle_f32x4(r[m], r[4 + m], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 u1 = _mm512_shuffle_f32x4(r[m], r[4 + m], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512 u2 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 u3 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], _MM_SHUFFLE(3, 2, 3, 2));
    t[m] = _mm512_shuffle_f32x4(u0, u2, _MM_SHUFFLE(2, 0, 2, 0));
    t[4 + m] = _mm512_shuffle_f32x4(u0, u2, _MM_SHUFFLE(3, 1, 3, 1));
    t[8 + m] = _mm512_shuffle_f32x4(u1, u3, _MM_SHUFFLE(2, 0, 2, 0));
    t[12 + m] = _mm512_shuffle_f32x4(u1, u3, _MM_SHUFFLE(3, 1, 3, 1));
  }
  #pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// The scores of the 16 queries of qt ((kHead, 16): value d of query i at qt[16 d + i]) against
// keys a and b (kHead floats each), scaled: lane i of *sa, *sb.
inline void lane_pair_scores(const float* qt, const float* a, const float* b, float scale, __m512* sa, __m512* sb) {
  __m512 ca[8], cb[8];  // chain c of each key
  #pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) ca[c] = cb[c] = _mm512_setzero_ps();
  #pragma GCC unroll 64
  for (int d = 0; d < kHead; ++d) {
    const __m512 qv = _mm512_load_ps(qt + 16 * d);
    ca[d % 8] = _mm512_fmadd_ps(qv, _mm512_set1_ps(a[d]), ca[d % 8]);
    cb[d % 8] = _mm512_fmadd_ps(qv, _mm512_set1_ps(b[d]), cb[d % 8]);
  }
  auto tree = [](const __m512* c) {
    return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c[0], c[4]), _mm512_add_ps(c[2], c[6])),
                         _mm512_add_ps(_mm512_add_ps(c[1], c[5]), _mm512_add_ps(c[3], c[7])));
  };
  *sa = _mm512_mul_ps(tree(ca), _mm512_set1_ps(scale));
  *sb = _mm512_mul_ps(tree(cb), _mm512_set1_ps(scale));
}

// Queries [0, n_q) against all n_keys keys, 16 at a time (the last group's lanes past n_q are
// zero queries, their scores not stored); a group's pass reads the call's keys from L1/L2 (64 KiB
// at 256 keys).
inline void scores_lanes(const float* q, int n_q, const float* const* keys, int n_keys, float scale,
                         float* scores, size_t score_stride) {
  alignas(64) float qt[kHead * kLaneQueries];  // (kHead, 16): one group's queries transposed, 4 KiB
  const int n_groups = (n_q + kLaneQueries - 1) / kLaneQueries;
  for (int g = 0; g < n_groups; ++g) {
    const float* qg = q + static_cast<size_t>(g) * kLaneQueries * kHead;
    const int n_valid = n_q - g * kLaneQueries < kLaneQueries ? n_q - g * kLaneQueries : kLaneQueries;
    #pragma GCC unroll 1
    for (int b = 0; b < kHead / 16; ++b) {  // values 16b..16b+15 of the 16 queries (zeros past n_valid)
      __m512 r[16];
      #pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) r[i] = i < n_valid ? _mm512_loadu_ps(qg + i * kHead + 16 * b) : _mm512_setzero_ps();
      transpose16(r);
      #pragma GCC unroll 16
      for (int c = 0; c < 16; ++c) _mm512_store_ps(qt + 16 * (16 * b + c), r[c]);
    }
    float* rows = scores + static_cast<size_t>(g) * kLaneQueries * score_stride;
    for (int j0 = 0; j0 < n_keys; j0 += 16) {
      const int nk = n_keys - j0 < 16 ? n_keys - j0 : 16;
      __m512 s[16];  // s[j] lane i: query i, key j0 + j
      for (int j = 0; j < 16; j += 2) {
        if (j >= nk) {
          s[j] = s[j + 1] = _mm512_setzero_ps();
          continue;
        }
        if (g == 0 && j0 + kPrefetchKeysAhead + j + 1 < n_keys) {  // the first group's pass
          prefetch_row_l2(keys[j0 + kPrefetchKeysAhead + j]);
          prefetch_row_l2(keys[j0 + kPrefetchKeysAhead + j + 1]);
        }
        lane_pair_scores(qt, keys[j0 + j], keys[j0 + (j + 1 < nk ? j + 1 : j)], scale, &s[j], &s[j + 1]);
      }
      transpose16(s);  // s[i] lane j: query i, key j0 + j
      const __mmask16 m = static_cast<__mmask16>((1u << nk) - 1u);
      for (int i = 0; i < n_valid; ++i)
        _mm512_mask_storeu_ps(rows + static_cast<size_t>(i) * score_stride + j0, m, s[i]);
    }
  }
}

// Queries per chunk of the loop above. With F16 keys a 9-row verify of the 1B shape asks 36 per
// kv head: one chunk; with F32 keys at most 15 come here (past the groups of 16). A 64-row
// prefill chunk's 16-row tiles ask 64 F16 queries: 2 chunks, each loading and converting the
// block's keys again (16 load_pair per 4 keys, against 10 passes of 64 FMAs over them).
constexpr int kDupQueries = 40;

// F32 keys: groups of 16 queries go through scores_lanes, the rest through scores_chunk. F16
// keys all go through scores_chunk, which converts each key once per call in registers: with the
// keys converted into an F32 buffer for scores_lanes, a 1B-shape 9-row call over 4k cached keys
// took as long as before (4.3 ms on one thread, 5 alternating rounds). One pass per key
// group (a decode's 1-4 queries per kv head) reads each slice once either way: no copy then.
template <typename E>
void scores_head64(const float* q, int n_q, const E* const* keys, int n_keys, float scale, float* scores,
                   size_t score_stride) {
  bool keys_read = false;  // by scores_lanes, which prefetched them
  if constexpr (std::is_same_v<E, float>) {
    // Whole groups of 16, and a last one of kLanePartialMin or more (its other lanes zero).
    const int done = n_q % kLaneQueries >= kLanePartialMin ? n_q : n_q / kLaneQueries * kLaneQueries;
    if (done > 0) {
      scores_lanes(q, done, keys, n_keys, scale, scores, score_stride);
      q += static_cast<size_t>(done) * kHead, n_q -= done, scores += static_cast<size_t>(done) * score_stride;
      if (n_q == 0) return;
      keys_read = true;
    }
  }
  if (n_q <= kScoreQueries) {
    if (keys_read) return scores_chunk<false, false>(q, n_q, keys, n_keys, scale, scores, score_stride);
    return scores_chunk<false, true>(q, n_q, keys, n_keys, scale, scores, score_stride);
  }
  alignas(64) float q2[kDupQueries * kVecs * 16];  // (kDupQueries, kVecs, 16): 20 KiB
  for (int c0 = 0; c0 < n_q; c0 += kDupQueries) {
    const int n = n_q - c0 < kDupQueries ? n_q - c0 : kDupQueries;
    for (int i = 0; i < n; ++i) {
      const float* qi = q + static_cast<size_t>(c0 + i) * kHead;
      #pragma GCC unroll 8
      for (int v = 0; v < kVecs; ++v) _mm512_store_ps(q2 + (i * kVecs + v) * 16, _mm512_broadcast_f32x8(_mm256_loadu_ps(qi + 8 * v)));
    }
    float* chunk_scores = scores + static_cast<size_t>(c0) * score_stride;
    if (c0 == 0 && !keys_read) {
      scores_chunk<true, true>(q2, n, keys, n_keys, scale, chunk_scores, score_stride);
    } else {
      scores_chunk<true, false>(q2, n, keys, n_keys, scale, chunk_scores, score_stride);
    }
  }
}

// out_i[0..64) += sum over keys in order of w_ij * values[j][0..64) for queries [i0, i0 + N):
// each output lane one FMA chain over the keys, from its current value (the AVX2 chain; a
// 16-lane vector holds two of the AVX2 loop's 8-lane chains).
template <typename E, int N>
inline void sum_queries(const float* weights, size_t weight_stride, int i0, const E* const* values, int n_keys,
                        float* out, uintptr_t ahead = 0) {
  constexpr int kVecs16 = kHead / 16;
  __m512 o[N][kVecs16];
  #pragma GCC unroll 6
  for (int i = 0; i < N; ++i) {
    #pragma GCC unroll 4
    for (int v = 0; v < kVecs16; ++v) o[i][v] = _mm512_loadu_ps(out + static_cast<size_t>(i0 + i) * kHead + 16 * v);
  }
  for (int j = 0; j < n_keys; ++j) {
    const E* value = values[j];
    if (ahead != 0) prefetch_l2(reinterpret_cast<uintptr_t>(value) + ahead, static_cast<int>(kHead * sizeof(E)));
    __m512 x[kVecs16];
    #pragma GCC unroll 4
    for (int v = 0; v < kVecs16; ++v) x[v] = load16(value + 16 * v);
    #pragma GCC unroll 6
    for (int i = 0; i < N; ++i) {
      const __m512 w = _mm512_set1_ps(weights[static_cast<size_t>(i0 + i) * weight_stride + j]);
      #pragma GCC unroll 4
      for (int v = 0; v < kVecs16; ++v) o[i][v] = _mm512_fmadd_ps(w, x[v], o[i][v]);
    }
  }
  #pragma GCC unroll 6
  for (int i = 0; i < N; ++i) {
    #pragma GCC unroll 4
    for (int v = 0; v < kVecs16; ++v) _mm512_storeu_ps(out + static_cast<size_t>(i0 + i) * kHead + 16 * v, o[i][v]);
  }
}

template <typename E>
void accumulate_head64(const float* weights, size_t weight_stride, int n_q, const E* const* values, int n_keys,
                       float* out) {
  // Rows evenly spaced (the cached prefix): the first pass (of up to 6 queries) over them also
  // prefetches the rows that follow them, the next call's.
  uintptr_t first_ahead = rows_ahead(values, n_keys);
  int i0 = 0;
  for (; i0 + kSumQueries <= n_q; i0 += kSumQueries, first_ahead = 0)
    sum_queries<E, kSumQueries>(weights, weight_stride, i0, values, n_keys, out, first_ahead);
  switch (n_q - i0) {
    case 5: return sum_queries<E, 5>(weights, weight_stride, i0, values, n_keys, out, first_ahead);
    case 4: return sum_queries<E, 4>(weights, weight_stride, i0, values, n_keys, out, first_ahead);
    case 3: return sum_queries<E, 3>(weights, weight_stride, i0, values, n_keys, out, first_ahead);
    case 2: return sum_queries<E, 2>(weights, weight_stride, i0, values, n_keys, out, first_ahead);
    case 1: return sum_queries<E, 1>(weights, weight_stride, i0, values, n_keys, out, first_ahead);
    default: return;
  }
}

}  // namespace

void softmax_avx512(float* x, int n) {
  if (n < 16) return softmax_avx2(x, n);  // the same bits: one 8-lane pass at most
  const int n_vec = n / 8 * 8, n16 = n / 16 * 16;  // softmax_avx2's vector part, its 16-lane part
  __m512 m16 = _mm512_loadu_ps(x);
  __mmask16 has_nan = _mm512_cmp_ps_mask(m16, m16, _CMP_UNORD_Q);
  for (int i = 16; i < n16; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    has_nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    m16 = _mm512_max_ps(m16, v);
  }
  __m256 m = _mm256_max_ps(_mm512_castps512_ps256(m16), _mm512_extractf32x8_ps(m16, 1));
  if (n16 < n_vec) {
    const __m256 v = _mm256_loadu_ps(x + n16);
    has_nan |= static_cast<__mmask16>(_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
    m = _mm256_max_ps(m, v);
  }
  // The maximum of the same values: order changes at most the sign of a zero maximum, and
  // x - (+0) and x - (-0) are equal but for x = -0, whose exp is 1 either way.
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  float max_value = _mm_cvtss_f32(h);
  if (has_nan != 0) max_value = __builtin_nanf("");
  for (int i = n_vec; i < n; ++i) max_value = x[i] > max_value || x[i] != x[i] ? x[i] : max_value;
  // softmax_avx2's sums: lanes 0-3 of each 8 values into s0, 4-7 into s1 (here lanes 0-3 and
  // 4-7 of s01), 8 values at a time in order.
  const __m512 mv = _mm512_set1_ps(max_value);
  __m512d s01 = _mm512_setzero_pd();
  for (int i = 0; i < n16; i += 16) {
    const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv));
    _mm512_storeu_ps(x + i, e);
    s01 = _mm512_add_pd(s01, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    s01 = _mm512_add_pd(s01, _mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)));
  }
  if (n16 < n_vec) {
    const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + n16), _mm512_castps512_ps256(mv)));
    _mm256_storeu_ps(x + n16, e);
    s01 = _mm512_add_pd(s01, _mm512_cvtps_pd(e));
  }
  const __m256d s = _mm256_add_pd(_mm512_castpd512_pd256(s01), _mm512_extractf64x4_pd(s01, 1));
  const double sum = softmax_sum_and_tail(s, x, n_vec, n, max_value);
  const float inv_sum = static_cast<float>(1.0 / sum);
  const __m512 inv16 = _mm512_set1_ps(inv_sum);
  for (int i = 0; i < n16; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), inv16));
  for (int i = n16; i < n; ++i) x[i] *= inv_sum;
}

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
