// AVX-512 VNNI tiles for the legacy 32-value blocks (Q4_0, Q4_1, Q5_0, Q5_1; in place, or
// repacked as Blocks32PairTiles16 when n_in is a multiple of 64) and Q2_K, Q3_K (in place, or
// repacked as Chunks16Tiles16).
// Each runs matmul_tiles_avx2.cpp's formulas for its type (see that file's per-row operation
// order), so the AVX-512 and AVX2 paths give the same bits.
// Tiles and accessors: matmul_tiles_avx512.h. Reached only through matmul_range_tiled_avx512.
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 AVX-512 headers (bug 105593)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "kernels/matmul_internal.h"
#include "kernels/matmul_tiles_avx512.h"
#include "kernels/quant_blocks.h"

namespace specdec::matmul_detail {

namespace {
// ---- The legacy 32-value blocks (matmul_tiles_avx2.cpp's legacy_tile, the same formulas and
// so the same bits): binary16 d, for Q4_1/Q5_1 binary16 m, for Q5_0/Q5_1 qh (bit j: the fifth
// bit of value j), 16 bytes of nibbles (values 0..15 low, 16..31 high).
//   Q4_0, Q5_0: S = sum(q * a_b) - 8 (16) * sum(a_b); acc = fma(float(S) * da_b, d, acc)
//   Q4_1, Q5_1: S = sum(q * a_b); f = fma(m, float(sum a_b), float(S) * d); acc = fma(f, da_b, acc)
// The fifth bits of v[k] (values 4k..4k+3) are bits 4(k % 2)..+3 of qh byte k / 2: that byte
// is copied to the 4 bytes of its dword, each byte tests its own bit, and the set ones get 16.
//
// Block b's fields come through three accessors, for the file's rows (Tile) and for the
// Blocks32PairTiles16 layout (LegacyTile16): its 16 qs bytes transposed (raw[k] lane L =
// qs[4k..4k+3] of row L), its qh dword per lane, and its binary16 unit u per lane (u = 0: d,
// 1: m). Both give the same values, so the same bits.
template <typename F>
inline void legacy_qs(const Tile& t, int64_t b, __m512i* raw) { load_transposed16(t, b * F::kBytes + F::kQsOffset, raw); }
template <typename F>
inline __m512i legacy_qh(const Tile& t, int64_t b) { return gather_dword(t, b * F::kBytes + F::kQhOffset); }
template <typename F>
inline __m512 legacy_half(const Tile& t, int64_t b, int unit) { return gather_half(t, b * F::kBytes, 16 * unit); }

// A Blocks32PairTiles16 matrix: units of 2 F::kPairBytes (two blocks); its own tile type for
// the accessors below.
struct LegacyTile16 : Tile16 {};

// Unit u of block b: one binary16-sized unit per row, as 16 uint16.
template <typename F>
inline __m256i tile16_unit(const LegacyTile16& t, int64_t b, int64_t u) {
  const int64_t x = 256 + 16 * ((b % 2) * F::kUnits + u);
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(t.p + (b / 2) * (2 * F::kPairBytes) + 2 * x));
}
template <typename F>
inline void legacy_qs(const LegacyTile16& t, int64_t b, __m512i* raw) {
  const uint8_t* unit = t.p + (b / 2) * (2 * F::kPairBytes);
  #pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) raw[k] = load64(unit + 2 * (128 * (b % 2) + 32 * k));
}
template <typename F>
inline __m512i legacy_qh(const LegacyTile16& t, int64_t b) {
  constexpr int64_t u = F::kQhOffset / 2;  // qh bytes 0-1, then 2-3
  return _mm512_or_si512(_mm512_cvtepu16_epi32(tile16_unit<F>(t, b, u)),
                         _mm512_slli_epi32(_mm512_cvtepu16_epi32(tile16_unit<F>(t, b, u + 1)), 16));
}
template <typename F>
inline __m512 legacy_half(const LegacyTile16& t, int64_t b, int unit) { return _mm512_cvtph_ps(tile16_unit<F>(t, b, unit)); }

template <bool kFiveBit, bool kMin, typename TileT, typename RB>
void legacy_tile(const TileT& t, int64_t n_blocks, const RB& rb, __m512* acc) {
  using F = LegacyFields<kFiveBit, kMin>;
  constexpr int kNegSumDivisor = kFiveBit ? 8 : 16;  // -128 sum(a) / this = -offset * sum(a)
  const __m512i low4 = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
  const __m512i bit_lo = _mm512_set1_epi32(0x08040201), bit_hi = _mm512_set1_epi32(static_cast<int>(0x80402010u));
  // shuffle control: byte i of dword j (of each 128-bit lane) <- byte 4j + k/2; k/2 added below
  const __m512i dword_base = _mm512_broadcast_i32x4(_mm_setr_epi32(0, 0x04040404, 0x08080808, 0x0C0C0C0C));
  for (int64_t b = 0; b < n_blocks; ++b) {
    prefetch_next<RB::kPrefetchIntoL1>(t, b);
    __m512i raw[4], v[8];
    legacy_qs<F>(t, b, raw);
    #pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm512_and_si512(raw[k], low4);
      v[4 + k] = _mm512_and_si512(_mm512_srli_epi16(raw[k], 4), low4);
    }
    if constexpr (kFiveBit) {
      const __m512i qh = legacy_qh<F>(t, b);
      #pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        const __m512i byte = _mm512_shuffle_epi8(qh, _mm512_add_epi8(dword_base, _mm512_set1_epi8(static_cast<char>(k / 2))));
        const __mmask64 set = _mm512_test_epi8_mask(byte, k % 2 == 0 ? bit_lo : bit_hi);
        v[k] = _mm512_mask_add_epi8(v[k], set, v[k], bit4);  // bit 4 is clear: + 16 = | 16
      }
    }
    if constexpr (kMin) {
      const __m512 d = legacy_half<F>(t, b, 0), m = legacy_half<F>(t, b, 1);
      for (int r = 0; r < rb.R; ++r) {
        const __m512i sdot = block_dot(v, rb.values(r) + 32 * b, _mm512_setzero_si512());
        const __m512 f = _mm512_fmadd_ps(m, _mm512_set1_ps(rb.sum32(r, b)), _mm512_mul_ps(_mm512_cvtepi32_ps(sdot), d));
        acc[r] = _mm512_fmadd_ps(f, _mm512_set1_ps(rb.da(r, b)), acc[r]);
      }
    } else {
      const __m512 d = legacy_half<F>(t, b, 0);
      for (int r = 0; r < rb.R; ++r) {
        const __m512i s = block_dot(v, rb.values(r) + 32 * b, _mm512_set1_epi32(rb.neg128_sum32(r, b) / kNegSumDivisor));
        const __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(rb.da(r, b)));
        acc[r] = _mm512_fmadd_ps(f, d, acc[r]);
      }
    }
  }
}

// ---- Q3_K and Q2_K (matmul_tiles_avx2.cpp's q3_k_tile and q2_k_tile: their layouts, formulas
// and bits). The 2-bit values of part p of 32 qs bytes (bits 2p..2p+1), the 8 vectors of a block.
inline void two_bit_values(const __m512i* qs, int part, __m512i* v) {
  #pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) v[k] = _mm512_and_si512(_mm512_srli_epi16(qs[k], 2 * part), _mm512_set1_epi8(3));
}

// Byte g % 4 of packed[g / 4] in each lane, as int32.
inline __m512i lane_byte(const __m512i* packed, int g) {
  return _mm512_and_si512(_mm512_srli_epi32(packed[g / 4], static_cast<unsigned>(8 * (g % 4))), _mm512_set1_epi32(0xFF));
}

inline __m512 half_of(__m512i dw, int shift) {  // the binary16 in the low (0) or high (16) half of each dword
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(shift == 0 ? dw : _mm512_srli_epi32(dw, 16)));
}

// S0, S1 = the two groups' dots from init0 / init1; f = fma(float(S0), ws0, float(S1) * ws1).
inline __m512 two_group_step(const __m512i* v, const int8_t* a, int32_t init0, int32_t init1, __m512 ws0, __m512 ws1) {
  const __m512i s0 = group_dot(v, a, _mm512_set1_epi32(init0)), s1 = group_dot(v + 4, a + 16, _mm512_set1_epi32(init1));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), ws0, _mm512_mul_ps(_mm512_cvtepi32_ps(s1), ws1));
}

// A Q3_K super-block's packed scale bytes 0-3, 4-7, 8-11 (aux[0..2], one dword per lane) and d.
// In place: one transposed 16-byte load at byte 94 (qs[62..63], scales, d), realigned.
inline __m512 q3_k_scale_words(const SuperBlock<Tile>& u, __m512i* aux) {
  __m512i x[4];  // bytes 94..109 of each block: qs[62..63], scales[0..11], d
  load_transposed16(u, 94, x);
  #pragma GCC unroll 3
  for (int i = 0; i < 3; ++i) aux[i] = _mm512_or_si512(_mm512_srli_epi32(x[i], 16), _mm512_slli_epi32(x[i + 1], 16));
  return half_of(x[3], 16);
}
// Repacked (ChunkTile16): scales and d lie in the super-block's tail of 2-byte units.
template <int64_t kBlock>
inline __m512 q3_k_scale_words(const ChunkSuperBlock<kBlock>& u, __m512i* aux) {
  #pragma GCC unroll 3
  for (int i = 0; i < 3; ++i) aux[i] = gather_dword(u, 96 + 4 * i);
  return gather_half(u, 108, 0);
}

// TileT: the in-place Tile or a ChunkTile16 (Q2_K, Q3_K repacked on AVX-512): the same values
// and scales through the super-block accessors, so the same bits. One activation row spreads
// the weight prefetch over the super-block's 8 blocks, as the K-quant tiles.
template <typename TileT, typename RB>
void q3_k_tile(const TileT& t, int64_t n_super, const RB& rb, __m512* acc) {
  const __m512i m4 = _mm512_set1_epi32(0x0F0F0F0F), m2 = _mm512_set1_epi32(0x03030303), bias = _mm512_set1_epi32(32);
  for (int64_t s = 0; s < n_super; ++s) {
    const auto sb = super_block(t, s, static_cast<int64_t>(sizeof(quant::BlockQ3_K)));
    if constexpr (!RB::kOneRow) prefetch_next<RB::kPrefetchIntoL1>(t, s);
    __m512i aux[3];
    const __m512 d = q3_k_scale_words(sb, aux);
    const __m512i aux0 = aux[0], aux1 = aux[1], aux2 = aux[2];
    __m512i sc[4];  // sc[q] lane L byte j: 6-bit scale 4q + j of row L (stored + 32)
    sc[0] = _mm512_or_si512(_mm512_and_si512(aux0, m4), _mm512_slli_epi32(_mm512_and_si512(aux2, m2), 4));
    sc[1] = _mm512_or_si512(_mm512_and_si512(aux1, m4), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(aux2, 2), m2), 4));
    sc[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(aux0, 4), m4),
                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(aux2, 4), m2), 4));
    sc[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(aux1, 4), m4),
                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(aux2, 6), m2), 4));
    __m512i hm[8];  // hm[k] lane L: hmask bytes 4k..4k+3 of row L
    load_transposed32(sb, 0, hm);
    #pragma GCC unroll 2
    for (int n = 0; n < 2; ++n) {
      __m512i qs[8];
      load_transposed32(sb, 32 + 32 * n, qs);
      #pragma GCC unroll 4
      for (int part = 0; part < 4; ++part) {  // 32 values: groups 8n + 2 part, + 1
        if constexpr (RB::kOneRow) prefetch_next_part<RB::kPrefetchIntoL1, 8>(t, s, 4 * n + part);
        __m512i v[8];
        two_bit_values(qs, part, v);
        #pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {  // + 4 where bit 4n + part of the hmask byte is set (bit 2 is clear)
          const __mmask64 set = _mm512_test_epi8_mask(hm[k], _mm512_set1_epi8(static_cast<char>(1 << (4 * n + part))));
          v[k] = _mm512_mask_add_epi8(v[k], set, v[k], _mm512_set1_epi8(4));
        }
        const int g0 = 8 * n + 2 * part;
        const __m512 ws0 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(lane_byte(sc, g0), bias)));
        const __m512 ws1 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(lane_byte(sc, g0 + 1), bias)));
        const int64_t b = 8 * s + 4 * n + part;
        for (int r = 0; r < rb.R; ++r) {
          const __m512 f = two_group_step(v, rb.values(r) + 32 * b, rb.neg32_sum16(r, 2 * b) / 8,
                                          rb.neg32_sum16(r, 2 * b + 1) / 8, ws0, ws1);
          acc[r] = _mm512_fmadd_ps(f, _mm512_set1_ps(rb.da(r, b)), acc[r]);
        }
      }
    }
  }
}

template <typename TileT, typename RB>
void q2_k_tile(const TileT& t, int64_t n_super, const RB& rb, __m512* acc) {
  const __m512i nibble = _mm512_set1_epi32(0xF);
  for (int64_t s = 0; s < n_super; ++s) {
    const auto sb = super_block(t, s, static_cast<int64_t>(sizeof(quant::BlockQ2_K)));
    if constexpr (!RB::kOneRow) prefetch_next<RB::kPrefetchIntoL1>(t, s);
    __m512i scb[4];  // scb[q] lane L byte j: scales[4q + j] of row L
    load_transposed16(sb, 0, scb);
    const __m512i dm = gather_dword(sb, 80);  // d | dmin << 16
    const __m512 d = half_of(dm, 0), neg_dmin = _mm512_sub_ps(_mm512_setzero_ps(), half_of(dm, 16));
    #pragma GCC unroll 2
    for (int n = 0; n < 2; ++n) {
      __m512i qs[8];
      load_transposed32(sb, 16 + 32 * n, qs);
      #pragma GCC unroll 4
      for (int part = 0; part < 4; ++part) {  // 32 values: groups 8n + 2 part, + 1
        if constexpr (RB::kOneRow) prefetch_next_part<RB::kPrefetchIntoL1, 8>(t, s, 4 * n + part);
        __m512i v[8];
        two_bit_values(qs, part, v);
        const int g0 = 8 * n + 2 * part;
        const __m512i byte0 = lane_byte(scb, g0), byte1 = lane_byte(scb, g0 + 1);
        const __m512 ws0 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_and_si512(byte0, nibble)));
        const __m512 ws1 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_and_si512(byte1, nibble)));
        const __m512 wm0 = _mm512_mul_ps(neg_dmin, _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(byte0, 4), nibble)));
        const __m512 wm1 = _mm512_mul_ps(neg_dmin, _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(byte1, 4), nibble)));
        const int64_t b = 8 * s + 4 * n + part;
        for (int r = 0; r < rb.R; ++r) {
          __m512 f = two_group_step(v, rb.values(r) + 32 * b, 0, 0, ws0, ws1);
          const float n0 = static_cast<float>(rb.neg32_sum16(r, 2 * b) / -32);
          const float n1 = static_cast<float>(rb.neg32_sum16(r, 2 * b + 1) / -32);
          f = _mm512_fmadd_ps(wm0, _mm512_set1_ps(n0), _mm512_fmadd_ps(wm1, _mm512_set1_ps(n1), f));
          acc[r] = _mm512_fmadd_ps(f, _mm512_set1_ps(rb.da(r, b)), acc[r]);
        }
      }
    }
  }
}

}  // namespace

bool matmul_range_tiled_small_avx512(const RangeJob& job) {
  const WeightMatrix& w = *job.w;
  const int64_t n32 = w.n_in / 32, n256 = w.n_in / 256;  // block iterations: 32-value blocks, super-blocks
  if (w.layout == WeightLayout::Chunks16Tiles16) {
    using Q2K = ChunkTile16<sizeof(quant::BlockQ2_K)>;
    using Q3K = ChunkTile16<sizeof(quant::BlockQ3_K)>;
    switch (w.type) {  // units: super-blocks of Q*K::kStride bytes
      case DType::Q2_K: tiles16<Q2K>(job, n256 * Q2K::kStride, n256, SPECDEC_TILE(q2_k_tile)); return true;
      case DType::Q3_K: tiles16<Q3K>(job, n256 * Q3K::kStride, n256, SPECDEC_TILE(q3_k_tile)); return true;
      default: return false;
    }
  }
  if (w.layout == WeightLayout::Blocks32PairTiles16) {
    const int64_t tile8 = legacy_tile_bytes(w.n_in, static_cast<int64_t>(w.row_bytes) / n32);
    switch (w.type) {
      case DType::Q4_0: tiles16<LegacyTile16>(job, tile8, n32, SPECDEC_TILE(legacy_tile<false, false>)); return true;
      case DType::Q4_1: tiles16<LegacyTile16>(job, tile8, n32, SPECDEC_TILE(legacy_tile<false, true>)); return true;
      case DType::Q5_0: tiles16<LegacyTile16>(job, tile8, n32, SPECDEC_TILE(legacy_tile<true, false>)); return true;
      case DType::Q5_1: tiles16<LegacyTile16>(job, tile8, n32, SPECDEC_TILE(legacy_tile<true, true>)); return true;
      default: return false;
    }
  }
  switch (w.type) {
    case DType::Q4_0: in_place_tiles(job, n32, SPECDEC_TILE(legacy_tile<false, false>)); return true;
    case DType::Q4_1: in_place_tiles(job, n32, SPECDEC_TILE(legacy_tile<false, true>)); return true;
    case DType::Q5_0: in_place_tiles(job, n32, SPECDEC_TILE(legacy_tile<true, false>)); return true;
    case DType::Q5_1: in_place_tiles(job, n32, SPECDEC_TILE(legacy_tile<true, true>)); return true;
    case DType::Q2_K: in_place_tiles(job, n256, SPECDEC_TILE(q2_k_tile)); return true;
    case DType::Q3_K: in_place_tiles(job, n256, SPECDEC_TILE(q3_k_tile)); return true;
    default: return false;
  }
}
#undef SPECDEC_TILE

}  // namespace specdec::matmul_detail
