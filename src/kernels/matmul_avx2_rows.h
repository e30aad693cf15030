// kernels/matmul_avx2_rows.h — the per-activation-row half of the AVX2 integer tiles, shared by
// the in-place tiles (matmul_tiles_avx2.cpp) and the repacked Q8_0 tiles
// (matmul_repacked_avx2.cpp). Include only from translation units compiled with the AVX2 flags:
// everything here has internal linkage, so no copy built with wide-ISA flags can be picked by
// the linker for a baseline caller.
//
// A tile is 8 weight rows, one per 32-bit vector lane. For each block of 32 weight values the
// caller holds 8 vectors v[k] whose lane L holds values 4k..4k+3 of row L; each activation row
// then needs, per block, 8 maddubs with its 4 values broadcast: lane L accumulates exactly the
// integer dot product of row L's block, and one float step per block scales it.
//
// The products: the AVX2 build multiplies with vpmaddubsw (u8 x s8 byte pairs summed to int16),
// sums in int16 as far as the bounds of matmul_tiles_avx2.cpp allow and widens with vpmaddwd.
// Each including file is also built with SPECDEC_AVX2_VNNI = 1 (AVX-VNNI, the VEX encoding) and
// 2 (AVX-512 VNNI + VL, EVEX), its entry points named by SPECDEC_AVX2_KERNEL (CMakeLists.txt:
// the Avx2Vnni builds; cpu.h Isa::Avx2Vnni). There each group of 4 byte products is one
// vpdpbusd added to an int32 lane: the same products, never saturated or wrapped in either
// build (those bounds), summed exactly, so the same integer S per block and the same bits.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "kernels/matmul_internal.h"

#ifndef SPECDEC_AVX2_VNNI
#define SPECDEC_AVX2_VNNI 0
#endif
#define SPECDEC_AVX2_PASTE2(a, b) a##b
#define SPECDEC_AVX2_PASTE(a, b) SPECDEC_AVX2_PASTE2(a, b)
#if SPECDEC_AVX2_VNNI == 1
#define SPECDEC_AVX2_KERNEL(name) SPECDEC_AVX2_PASTE(name, _avxvnni)
#elif SPECDEC_AVX2_VNNI == 2
#define SPECDEC_AVX2_KERNEL(name) SPECDEC_AVX2_PASTE(name, _evexvnni)
#else
#define SPECDEC_AVX2_KERNEL(name) name
#endif

namespace specdec::matmul_detail {
namespace {

#if SPECDEC_AVX2_VNNI
// acc + the sums of each lane's 4 products u8 x s8 (vpdpbusd ymm: exact, no saturation).
inline __m256i dpbusd(__m256i acc, __m256i u8, __m256i s8) {
#if SPECDEC_AVX2_VNNI == 1
  return _mm256_dpbusd_avx_epi32(acc, u8, s8);
#else
  return _mm256_dpbusd_epi32(acc, u8, s8);
#endif
}
#endif

constexpr int kLanes = 8;  // weight rows per tile

inline int min_int(int a, int b) { return a < b ? a : b; }

// The 4 activation bytes at a, in every lane.
inline __m256i bcast4(const int8_t* a) {
  int32_t v;
  std::memcpy(&v, a, 4);
  return _mm256_set1_epi32(v);
}

// y[r0 + r][o0 .. o0 + n_valid) = the first n_valid lanes of acc[r], for the R rows.
inline void store_outputs(const __m256* acc, const RowBlock& rb, float* y, int64_t n_out, int64_t o0, int n_valid) {
  for (int r = 0; r < rb.R; ++r) {
    float* dst = y + (rb.r0 + r) * n_out + o0;
    if (n_valid == kLanes) {
      _mm256_storeu_ps(dst, acc[r]);
    } else {
      alignas(32) float lanes[kLanes];
      _mm256_store_ps(lanes, acc[r]);
      std::memcpy(dst, lanes, static_cast<size_t>(n_valid) * sizeof(float));
    }
  }
}

// The outputs [job.o_begin, job.o_end) of a matrix stored as 8-row tiles of tile_bytes each
// (the repacked layouts): for each tile and each block of up to kRowBlock activation rows,
// tile_fn(tile, rb, acc) accumulates into acc[0 .. rb.R) (zeroed), which are then stored.
template <typename TileFn>
inline void for_each_repacked_tile(const RangeJob& job, int64_t tile_bytes, TileFn&& tile_fn) {
  const WeightMatrix& w = *job.w;
  __m256 acc[kRowBlock];  // (kRowBlock) one accumulator per activation row: 8 outputs
  for (int64_t o0 = job.o_begin; o0 < job.o_end; o0 += kLanes) {
    const int n_valid = static_cast<int>(job.o_end - o0 < kLanes ? job.o_end - o0 : kLanes);
    const uint8_t* tile = static_cast<const uint8_t*>(w.data) + (o0 / kLanes) * tile_bytes;
    for (int r0 = 0; r0 < job.M; r0 += kRowBlock) {
      const RowBlock rb{&job.acts, r0, min_int(kRowBlock, job.M - r0)};
      for (int r = 0; r < rb.R; ++r) acc[r] = _mm256_setzero_ps();
      tile_fn(tile, rb, acc);
      store_outputs(acc, rb, job.y, w.n_out, o0, n_valid);
    }
  }
}

// The float step of the one-scale blocks (Q8_0, Q4_0): acc = fma(float(S) * da, d, acc).
inline void scale_block(__m256i s, float da, __m256 d, __m256& acc) {
  acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(da)), d, acc);
}

// The exact integer dot products of one Q8_0 block of 8 rows with the 32 activation values at a:
// lane L = sum(q * a) of row L. v_abs(k) / v(k): |q| and q of vector k (values 4k..4k+3 of each
// row); |q| times sign(a, q) keeps maddubs' pairs <= 2 * 128 * 127. Two chains (even and odd
// k) for latency; integer sums are exact, so the order does not matter.
template <typename Abs, typename Val>
inline __m256i q8_0_block_dot(Abs v_abs, Val v, const int8_t* a) {
  __m256i s[2];
#if SPECDEC_AVX2_VNNI
  s[0] = s[1] = _mm256_setzero_si256();
  #pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) s[k % 2] = dpbusd(s[k % 2], v_abs(k), _mm256_sign_epi8(bcast4(a + 4 * k), v(k)));
#else
  const __m256i ones = _mm256_set1_epi16(1);
  #pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(v_abs(k), _mm256_sign_epi8(bcast4(a + 4 * k), v(k))), ones);
    s[k % 2] = k < 2 ? p : _mm256_add_epi32(s[k % 2], p);
  }
#endif
  return _mm256_add_epi32(s[0], s[1]);
}

#if SPECDEC_AVX2_VNNI
// The exact integer dot products of 32 activation values at a with 8 vectors of unsigned
// values v[k] (values 4k..4k+3 of each lane's row): two chains of 4 vpdpbusd.
inline __m256i u8_block_dot(const __m256i* v, const int8_t* a) {
  __m256i s0 = dpbusd(_mm256_setzero_si256(), v[0], bcast4(a));
  __m256i s1 = dpbusd(_mm256_setzero_si256(), v[1], bcast4(a + 4));
  #pragma GCC unroll 8
  for (int k = 2; k < 8; k += 2) {
    s0 = dpbusd(s0, v[k], bcast4(a + 4 * k));
    s1 = dpbusd(s1, v[k + 1], bcast4(a + 4 * k + 4));
  }
  return _mm256_add_epi32(s0, s1);
}
inline __m256i nibble_block_dot(const __m256i* v, const int8_t* a) { return u8_block_dot(v, a); }
inline __m256i five_bit_block_dot(const __m256i* v, const int8_t* a) { return u8_block_dot(v, a); }
#else
// Integer dot products of 32 activation values at a with 8 vectors of unsigned values < 16
// (Q4_K nibbles): the 8 maddubs are summed in int16 (<= 8 * 3810), then widened once.
inline __m256i nibble_block_dot(const __m256i* v, const int8_t* a) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i s0 = _mm256_maddubs_epi16(v[0], bcast4(a));
  __m256i s1 = _mm256_maddubs_epi16(v[1], bcast4(a + 4));
  #pragma GCC unroll 8
  for (int k = 2; k < 8; k += 2) {
    s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(v[k], bcast4(a + 4 * k)));
    s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(v[k + 1], bcast4(a + 4 * k + 4)));
  }
  return _mm256_madd_epi16(_mm256_add_epi16(s0, s1), ones);
}

// Integer dot products of 32 activation values at a with 8 vectors of unsigned values < 32
// (Q5_K): groups of 4 maddubs summed in int16 (<= 4 * 7874), widened twice.
inline __m256i five_bit_block_dot(const __m256i* v, const int8_t* a) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i s[2];
  #pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    __m256i p[4];
    #pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) p[k] = _mm256_maddubs_epi16(v[4 * h + k], bcast4(a + 16 * h + 4 * k));
    s[h] = _mm256_add_epi16(_mm256_add_epi16(p[0], p[1]), _mm256_add_epi16(p[2], p[3]));
  }
  return _mm256_add_epi32(_mm256_madd_epi16(s[0], ones), _mm256_madd_epi16(s[1], ones));
}
#endif

// Integer dot product of 16 activation values at a with 4 vectors of unsigned values < 64
// (Q6_K q + 32; Q3_K, Q2_K below that), starting from init: pairs of maddubs summed in int16
// (<= 2 * 16002), then widened; or 4 vpdpbusd.
inline __m256i six_bit_group_dot(const __m256i* v, const int8_t* a, __m256i init) {
#if SPECDEC_AVX2_VNNI
  const __m256i s01 = dpbusd(dpbusd(init, v[0], bcast4(a)), v[1], bcast4(a + 4));
  const __m256i s23 = dpbusd(dpbusd(_mm256_setzero_si256(), v[2], bcast4(a + 8)), v[3], bcast4(a + 12));
  return _mm256_add_epi32(s01, s23);
#else
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i p01 = _mm256_add_epi16(_mm256_maddubs_epi16(v[0], bcast4(a)), _mm256_maddubs_epi16(v[1], bcast4(a + 4)));
  const __m256i p23 = _mm256_add_epi16(_mm256_maddubs_epi16(v[2], bcast4(a + 8)), _mm256_maddubs_epi16(v[3], bcast4(a + 12)));
  return _mm256_add_epi32(init, _mm256_add_epi32(_mm256_madd_epi16(p01, ones), _mm256_madd_epi16(p23, ones)));
#endif
}

// One Q8_0 block b (values v[k], their absolute values v_abs[k], scales d, one per lane) applied
// to every row of rb: S = q8_0_block_dot, then acc[r] = fma(float(S) * da_b, d, acc[r]). Every
// Q8_0 path (in place, repacked, repacked at M = 1, the repacked row groups) computes this
// exact S and runs scale_block on it, block by block in order: the same bits.
inline void q8_0_block_rows(const __m256i* v, const __m256i* v_abs, __m256 d, const RowBlock& rb, int64_t b,
                            __m256* acc) {
  for (int r = 0; r < rb.R; ++r) {
    const __m256i s = q8_0_block_dot([&](int k) { return v_abs[k]; }, [&](int k) { return v[k]; }, rb.values(r) + 32 * b);
    scale_block(s, rb.da(r, b), d, acc[r]);
  }
}

}  // namespace
}  // namespace specdec::matmul_detail
