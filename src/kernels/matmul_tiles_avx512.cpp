// AVX-512 VNNI matmul kernels for Q8_0, Q4_K, Q5_K and Q6_K that read the quantized weight
// blocks in place (no unpacked copy), or the AVX2 path's repacked layouts (two stored 8-row
// tiles per 16-row tile: the same vectors without the in-register transposes); the other
// quantized types' tiles are in matmul_tiles_small_avx512.cpp, and repacked Q6_K (Q6KTiles16)
// has its own kernel, matmul_repacked_q6k_avx512.cpp, with q6_k_tile's values and steps.
// Compiled with the AVX-512 flags; reached only through matmul_range_avx512. Only raw pointers
// cross this file's boundary.
//
// Layout: a tile is 16 weight rows, one per vector lane. For each block of 32 weight values the
// 16 rows' bytes are transposed in registers into 8 vectors v[k] whose lane L holds values
// 4k..4k+3 of row L (4x4 dword transposes inside 128-bit lanes: cheap and shared by all M
// activation rows). Each activation row then needs, per block, 8 vpdpbusd with its 4 values
// broadcast: lane L accumulates exactly the integer dot product of row L's block (exact, so its
// order does not matter), and one float step per block scales it.
//
// Per (activation row r, weight row o) operation order, the same for every M, tile position
// and thread count (lanes are independent; activation rows are processed one at a time with
// the same instruction sequence):
//   acc = 0; for each block b of 32 values in order:
//     Q8_0: S = -128 * sum(a_b) + sum((q + 128) * a_b);   acc = fma(float(S) * da_b, d_b, acc)
//     Q4_K, Q5_K: S = sum(q * a_b);  f = fma(-dmin * m_b, float(sum a_b), float(S) * (d * sc_b));
//           acc = fma(f, da_b, acc)
//     Q6_K: S0, S1 = sum((q - 32) * a) over the two groups of 16;
//           f = fma(float(S0), d * sc_2b, float(S1) * (d * sc_2b+1)); acc = fma(f, da_b, acc)
//     Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K: the AVX2 tiles' formulas (matmul_tiles_small_avx512.cpp)
//   y = acc.
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 AVX-512 headers (bug 105593)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "kernels/matmul_internal.h"
#include "kernels/matmul_kquant_blocks_avx512.h"
#include "kernels/matmul_tiles_avx512.h"
#include "kernels/quant_blocks.h"

namespace specdec::matmul_detail {

namespace {
// Each tile function takes its activation rows as a RowBlock (rb.R rows, accumulators in acc)
// or, for M = 1, a OneRowBlock (rb.R = 1 at compile time, so acc[0] stays in a register):
// the same instructions per row either way, so the same bits.

// ---- Q8_0: blocks of 34 bytes (binary16 d, 32 int8 q)
// A repacked (Tiles16) tile at M = 1 prefetches as its one_row_* fields say (none under
// DecodePrefetch::Light: kTile16PrefetchBytes in matmul_tiles_avx512.h).
template <typename TileT, typename RB>
void q8_0_tile(const TileT& t, int64_t n_blocks, const RB& rb, __m512* acc) {
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < n_blocks; ++b) {
    prefetch_next<RB::kPrefetchIntoL1>(t, b);
    __m512i v[8];
    const __m512 d = q8_0_block(t, b, v);
    #pragma GCC unroll 16
    for (int k = 0; k < 8; ++k) v[k] = _mm512_xor_si512(v[k], bias);  // q + 128 as u8
    for (int r = 0; r < rb.R; ++r) {
      const __m512i s = block_dot(v, rb.values(r) + 32 * b, _mm512_set1_epi32(rb.neg128_sum32(r, b)));
      const __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(rb.da(r, b)));
      acc[r] = _mm512_fmadd_ps(f, d, acc[r]);
    }
  }
}

// ---- Q4_K, Q5_K (kFiveBit): the layouts at q45_k_sub_blocks (matmul_kquant_blocks_avx512.h).
template <bool kFiveBit, typename TileT, typename RB>
void q45_k_tile(const TileT& t, int64_t n_super, const RB& rb, __m512* acc) {
  for (int64_t s = 0; s < n_super; ++s) {
    if constexpr (!RB::kOneRow) prefetch_next<RB::kPrefetchIntoL1>(t, s);
    q45_k_sub_blocks<kFiveBit>(t, s, [&](int sub, const __m512i* v, __m512 ws, __m512 wm) {
      if constexpr (RB::kOneRow) prefetch_next_part<RB::kPrefetchIntoL1, 8>(t, s, sub);
      const int64_t b = 8 * s + sub;
      for (int r = 0; r < rb.R; ++r) {
        const __m512i sdot = block_dot(v, rb.values(r) + 32 * b, _mm512_setzero_si512());
        const __m512 f = _mm512_fmadd_ps(wm, _mm512_set1_ps(rb.sum32(r, b)), _mm512_mul_ps(_mm512_cvtepi32_ps(sdot), ws));
        acc[r] = _mm512_fmadd_ps(f, _mm512_set1_ps(rb.da(r, b)), acc[r]);
      }
    });
  }
}

// ---- Q6_K: the layout at q6_k_blocks, the step at q6_k_block_rows (matmul_kquant_blocks_avx512.h).
template <typename TileT, typename RB>
void q6_k_tile(const TileT& t, int64_t n_super, const RB& rb, __m512* acc) {
  for (int64_t s = 0; s < n_super; ++s) {
    if constexpr (!RB::kOneRow) prefetch_next<RB::kPrefetchIntoL1>(t, s);
    q6_k_blocks(t, s, [&](int block, const __m512i* v, __m512 ws0, __m512 ws1) {
      if constexpr (RB::kOneRow) prefetch_next_part<RB::kPrefetchIntoL1, 8>(t, s, block);
      q6_k_block_rows(v, ws0, ws1, 8 * s + block, rb, acc);
    });
  }
}

}  // namespace

bool matmul_range_tiled_avx512(const RangeJob& job) {
  const WeightMatrix& w = *job.w;
  const int64_t n32 = w.n_in / 32, n256 = w.n_in / 256;  // block iterations: 32-value blocks, super-blocks
  if (w.layout == WeightLayout::Q8_0Tiles16 && w.type == DType::Q8_0) {
    tiles16<Q8Tile16>(job, q8_tile_bytes(w.n_in), n32, SPECDEC_TILE(q8_0_tile));
    return true;
  }
  if (w.layout == WeightLayout::Q6KTiles16) {
    matmul_range_repacked_q6k_avx512(job);
    return true;
  }
  if (w.layout == WeightLayout::Chunks16Tiles16) {
    using Q4K = ChunkTile16<sizeof(quant::BlockQ4_K)>;
    using Q5K = ChunkTile16<sizeof(quant::BlockQ5_K)>;
    switch (w.type) {  // units: super-blocks of Q*K::kStride bytes
      case DType::Q4_K: tiles16<Q4K>(job, n256 * Q4K::kStride, n256, SPECDEC_TILE(q45_k_tile<false>)); return true;
      case DType::Q5_K: tiles16<Q5K>(job, n256 * Q5K::kStride, n256, SPECDEC_TILE(q45_k_tile<true>)); return true;
      default: return matmul_range_tiled_small_avx512(job);  // Q2_K, Q3_K
    }
  }
  switch (w.type) {
    case DType::Q8_0: in_place_tiles(job, n32, SPECDEC_TILE(q8_0_tile)); return true;
    case DType::Q4_K: in_place_tiles(job, n256, SPECDEC_TILE(q45_k_tile<false>)); return true;
    case DType::Q5_K: in_place_tiles(job, n256, SPECDEC_TILE(q45_k_tile<true>)); return true;
    case DType::Q6_K: in_place_tiles(job, n256, SPECDEC_TILE(q6_k_tile)); return true;
    default: return matmul_range_tiled_small_avx512(job);  // the legacy types, Q2_K, Q3_K
  }
}
#undef SPECDEC_TILE

}  // namespace specdec::matmul_detail
