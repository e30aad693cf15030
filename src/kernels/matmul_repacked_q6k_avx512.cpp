// AVX-512 VNNI matmul over Q6_K matrices repacked as Q6KTiles16 (matmul_internal.h: two
// Q6KTiles8 tiles interleaved so that each 16-row vector is one 64-byte load). Compiled with the
// AVX-512 flags; reached only through matmul_range_tiled_avx512.
//
// Why a layout of its own (as Q6KTiles8 on AVX2, BENCHMARKS 40): from the file's low nibbles and
// high bit pairs (Chunks16Tiles16, the AVX-512 path's Q6_K layout until BENCHMARKS 47) a 16-row
// tile rebuilt each block's 8 vectors with ~26 operations and extracted each group's scales with
// a shift pair, and at one activation row that was about half of the tile's work: a decode
// tile took twice a Q4_K tile's time per value from L2. Here three of a group's four vectors are
// one AND each, the fourth three masks, three shifts and an OR of three, and a group's 16 scales
// one sign-extending load.
//
// The values, the exact integer sums per group of 16 and the float steps are those of the
// in-place tile's q6_k_tile (matmul_tiles_avx512.cpp), whose per-block step (q6_k_block_rows
// in matmul_kquant_blocks_avx512.h) this kernel calls, so every output is bit for bit the
// in-place one, for every M, tile and thread.
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 AVX-512 headers (bug 105593)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/matmul_internal.h"
#include "kernels/matmul_kquant_blocks_avx512.h"
#include "kernels/matmul_tiles_avx512.h"

namespace specdec::matmul_detail {

namespace {

// A 16-row tile of a Q6KTiles16 matrix: one unit of 2 kQ6kUnitBytes per super-block.
struct Q6KTile16 : Tile16 {
  static constexpr bool kKQuant = true;  // a verify prefetches as the other K-quant tiles
  static constexpr bool kLightDecodeNone = true;
};
constexpr int64_t kUnit16Bytes = 2 * kQ6kUnitBytes;

// The 8 vectors of block j (values 32 j .. 32 j + 31) of a unit: v[k] lane L = the 6-bit values
// u = q + 32 of values 4k..4k+3 of row L's block. Per group of 16 (h): vectors 0-2 are the
// stored bytes' bits 0-5; vector 3 gathers their bits 6-7, each pair masked in its own byte
// before a 16-bit shift moves it down (so no bit crosses into the neighbouring byte).
inline void block_values(const uint8_t* unit, int j, __m512i* v) {
  const __m512i low6 = _mm512_set1_epi8(0x3F), high2 = _mm512_set1_epi8(static_cast<char>(0xC0));
  #pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const uint8_t* e = unit + 2 * (192 * j + 96 * h);  // (3 vectors of 64 bytes)
    const __m512i e0 = load64(e), e1 = load64(e + 64), e2 = load64(e + 128);
    v[4 * h] = _mm512_and_si512(e0, low6);
    v[4 * h + 1] = _mm512_and_si512(e1, low6);
    v[4 * h + 2] = _mm512_and_si512(e2, low6);
    v[4 * h + 3] = _mm512_or_si512(_mm512_or_si512(_mm512_srli_epi16(_mm512_and_si512(e0, high2), 6),
                                                   _mm512_srli_epi16(_mm512_and_si512(e1, high2), 4)),
                                   _mm512_srli_epi16(_mm512_and_si512(e2, high2), 2));
  }
}

// d * sc_g for group g (values 16 g .. 16 g + 15) of the 16 rows: the in-place tile's float
// scale (the int8 scale exactly as a float, times d).
inline __m512 group_scale(const uint8_t* unit, __m512 d, int g) {
  const __m128i sc = _mm_load_si128(reinterpret_cast<const __m128i*>(unit + 2 * kQ6kScalesOffset + 16 * g));
  return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)));
}

// The 16 outputs of one tile for the rows of rb, into acc[0 .. R). Its prefetch is the other
// K-quant tiles' (Tile16's fields: set_one_row_prefetch, set_rows_prefetch).
template <typename RB>
void q6k_tile16(const Q6KTile16& t, int64_t n_super, const RB& rb, __m512* acc) {
  for (int64_t s = 0; s < n_super; ++s) {
    if constexpr (!RB::kOneRow) prefetch_next<RB::kPrefetchIntoL1>(t, s);
    const uint8_t* unit = t.p + s * kUnit16Bytes;
    const __m512 d = halves16(unit + 2 * kQ6kDOffset);
    #pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      if constexpr (RB::kOneRow) prefetch_next_part<RB::kPrefetchIntoL1, 8>(t, s, j);
      __m512i v[8];
      block_values(unit, j, v);
      const __m512 ws0 = group_scale(unit, d, 2 * j), ws1 = group_scale(unit, d, 2 * j + 1);
      q6_k_block_rows(v, ws0, ws1, 8 * s + j, rb, acc);
    }
  }
}

}  // namespace

void matmul_range_repacked_q6k_avx512(const RangeJob& job) {
  const int64_t n_super = job.w->n_in / 256;
  tiles16<Q6KTile16>(job, n_super * kQ6kUnitBytes, n_super,
                     [](const auto& t, int64_t n, const auto& rb, __m512* acc) { q6k_tile16(t, n, rb, acc); });
}

}  // namespace specdec::matmul_detail
