// AVX-512 VNNI matmul kernels for Q8_0, Q4_K, Q5_K and Q6_K that read the quantized weight
// blocks in place (no unpacked copy), or the AVX2 path's repacked layouts (two stored 8-row
// tiles per 16-row tile: the same vectors without the in-register transposes); the other
// quantized types' tiles are in matmul_tiles_small_avx512.cpp. Compiled with the AVX-512 flags;
// reached only through matmul_range_avx512. Only raw pointers cross this file's boundary.
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
#include <type_traits>

#include "kernels/matmul_internal.h"
#include "kernels/matmul_tiles_avx512.h"
#include "kernels/quant_blocks.h"

namespace specdec::matmul_detail {

namespace {
// ---- Q8_0: blocks of 34 bytes (binary16 d, 32 int8 q)
template <typename TileT>
void q8_0_tile(const TileT& t, int64_t n_blocks, const RowBlock& rb, __m512* acc) {
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t off = b * static_cast<int64_t>(sizeof(quant::BlockQ8_0));
    prefetch_next(t, b);
    __m512i v[8];
    load_transposed32(t, off + 2, v);
    #pragma GCC unroll 16
    for (int k = 0; k < 8; ++k) v[k] = _mm512_xor_si512(v[k], bias);  // q + 128 as u8
    const __m512 d = gather_half(t, off, 0);
    for (int r = 0; r < rb.R; ++r) {
      const __m512i s = block_dot(v, rb.values(r) + 32 * b, _mm512_set1_epi32(rb.neg128_sum32(r, b)));
      const __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(rb.da(r, b)));
      acc[r] = _mm512_fmadd_ps(f, d, acc[r]);
    }
  }
}

// ---- Q4_K: super-blocks of 144 bytes: d, dmin (binary16), 12 bytes of packed 6-bit scales and
// mins for 8 sub-blocks of 32, 128 bytes of nibbles (per 64 values: 32 low nibbles, then the
// 32 high nibbles of the same bytes).
// ---- Q5_K (kFiveBit): 176 bytes: the same d, dmin and scales, then qh[32] (bit `sub` of qh[l]:
// the fifth bit of value l of sub-block `sub`), then the 128 bytes of nibbles. The same formula
// with q < 32 (matmul_tiles_avx2.cpp's q45_k_tile: the same bits).
template <bool kFiveBit, typename TileT>
void q45_k_tile(const TileT& t, int64_t n_super, const RowBlock& rb, __m512* acc) {
  using Block = std::conditional_t<kFiveBit, quant::BlockQ5_K, quant::BlockQ4_K>;
  constexpr int64_t kQsOffset = kFiveBit ? 48 : 16;  // offsetof(Block, qs)
  const __m512i low4 = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
  for (int64_t s = 0; s < n_super; ++s) {
    const int64_t sb = s * static_cast<int64_t>(sizeof(Block));
    prefetch_next(t, s);
    __m512i h[4];  // h[0]: d | dmin << 16; h[1..3]: packed scale bytes 0-3, 4-7, 8-11
    load_transposed16(t, sb, h);
    const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h[0]));
    const __m512 neg_dmin = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h[0], 16))));
    const __m512i m6 = _mm512_set1_epi8(0x3F), m4 = _mm512_set1_epi8(0x0F), m45 = _mm512_set1_epi8(0x30);
    // bytes j of sc_lo/m_lo: sub-block j < 4; of sc_hi/m_hi: sub-block 4 + j
    const __m512i sc_lo = _mm512_and_si512(h[1], m6), m_lo = _mm512_and_si512(h[2], m6);
    const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(h[3], m4), _mm512_and_si512(_mm512_srli_epi32(h[1], 2), m45));
    const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(h[3], 4), m4),
                                         _mm512_and_si512(_mm512_srli_epi32(h[2], 2), m45));
    __m512i qh[8];  // Q5_K: qh[k] lane L = qh bytes 4k..4k+3 of row L (values 4k..4k+3 of each sub-block)
    if constexpr (kFiveBit) {
      load_transposed32(t, sb + 16, qh);
    }
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {  // 64 values: sub-blocks 2j (low nibbles) and 2j + 1 (high)
      __m512i raw[8];
      load_transposed32(t, sb + kQsOffset + 32 * j, raw);
      #pragma GCC unroll 16
      for (int half = 0; half < 2; ++half) {
        const int sub = 2 * j + half;
        const __m512i scb = sub < 4 ? sc_lo : sc_hi, mb = sub < 4 ? m_lo : m_hi;
        const int shift = 8 * (sub % 4);
        const __m512i byte_mask = _mm512_set1_epi32(0xFF);
        const __m512 ws = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(scb, static_cast<unsigned>(shift)), byte_mask)));
        const __m512 wm = _mm512_mul_ps(neg_dmin, _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(mb, static_cast<unsigned>(shift)), byte_mask)));
        __m512i v[8];
        #pragma GCC unroll 16
        for (int k = 0; k < 8; ++k) {
          v[k] = half == 0 ? _mm512_and_si512(raw[k], low4) : _mm512_and_si512(_mm512_srli_epi16(raw[k], 4), low4);
          if constexpr (kFiveBit) {  // bytes whose qh bit `sub` is set get 16 (bit 4 is clear)
            const __mmask64 set = _mm512_test_epi8_mask(qh[k], _mm512_set1_epi8(static_cast<char>(1 << sub)));
            v[k] = _mm512_mask_add_epi8(v[k], set, v[k], bit4);
          }
        }
        const int64_t b = 8 * s + sub;
        for (int r = 0; r < rb.R; ++r) {
          const __m512i sdot = block_dot(v, rb.values(r) + 32 * b, _mm512_setzero_si512());
          const __m512 f = _mm512_fmadd_ps(wm, _mm512_set1_ps(rb.sum32(r, b)), _mm512_mul_ps(_mm512_cvtepi32_ps(sdot), ws));
          acc[r] = _mm512_fmadd_ps(f, _mm512_set1_ps(rb.da(r, b)), acc[r]);
        }
      }
    }
  }
}

// ---- Q6_K: super-blocks of 210 bytes: ql[128] (low 4 bits), qh[64] (high 2 bits), 16 int8
// scales (one per 16 values), binary16 d. Per 128 values n: value l (l < 32) is ql[64n + l] low
// nibble | (qh[32n + l] bits 0-1) << 4; l + 32: ql[64n + 32 + l] low | qh bits 2-3; l + 64:
// ql[64n + l] high | qh bits 4-5; l + 96: ql[64n + 32 + l] high | qh bits 6-7; minus 32.
template <typename TileT>
void q6_k_tile(const TileT& t, int64_t n_super, const RowBlock& rb, __m512* acc) {
  const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
  for (int64_t s = 0; s < n_super; ++s) {
    const int64_t sb = s * static_cast<int64_t>(sizeof(quant::BlockQ6_K));
    prefetch_next(t, s);
    const __m512 d = gather_half(t, sb + 206, 16);  // d is the last 2 bytes of the block
    __m512i sc[4];  // sc[q] lane L: scales 4q..4q+3 of row L
    load_transposed16(t, sb + 192, sc);
    #pragma GCC unroll 2
    for (int n = 0; n < 2; ++n) {
      __m512i ql_a[8], ql_c[8], qh[8];
      load_transposed32(t, sb + 64 * n, ql_a);
      load_transposed32(t, sb + 64 * n + 32, ql_c);
      load_transposed32(t, sb + 128 + 32 * n, qh);
      #pragma GCC unroll 4
      for (int part = 0; part < 4; ++part) {  // 32 values: groups 8n + 2 part, + 1
        __m512i v[8];
        #pragma GCC unroll 16
        for (int k = 0; k < 8; ++k) {
          const __m512i lo = part % 2 == 0 ? ql_a[k] : ql_c[k];
          const __m512i nib = part < 2 ? _mm512_and_si512(lo, low4) : _mm512_and_si512(_mm512_srli_epi16(lo, 4), low4);
          __m512i hi;
          switch (part) {
            case 0: hi = _mm512_slli_epi16(qh[k], 4); break;
            case 1: hi = _mm512_slli_epi16(qh[k], 2); break;
            case 2: hi = qh[k]; break;
            default: hi = _mm512_srli_epi16(qh[k], 2); break;
          }
          v[k] = _mm512_or_si512(nib, _mm512_and_si512(hi, bits45));
        }
        const int g0 = 8 * n + 2 * part;  // group index within the super-block
        // int8 scale of group g: byte g % 4 of sc[g / 4], sign-extended
        const __m512 ws0 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_srai_epi32(
            _mm512_slli_epi32(sc[g0 / 4], static_cast<unsigned>(24 - 8 * (g0 % 4))), 24)));
        const __m512 ws1 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_srai_epi32(
            _mm512_slli_epi32(sc[(g0 + 1) / 4], static_cast<unsigned>(24 - 8 * ((g0 + 1) % 4))), 24)));
        const int64_t b = 8 * s + 4 * n + part;
        for (int r = 0; r < rb.R; ++r) {
          const int8_t* a = rb.values(r) + 32 * b;
          const __m512i s0 = group_dot(v, a, _mm512_set1_epi32(rb.neg32_sum16(r, 2 * b)));
          const __m512i s1 = group_dot(v + 4, a + 16, _mm512_set1_epi32(rb.neg32_sum16(r, 2 * b + 1)));
          const __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), ws0, _mm512_mul_ps(_mm512_cvtepi32_ps(s1), ws1));
          acc[r] = _mm512_fmadd_ps(f, _mm512_set1_ps(rb.da(r, b)), acc[r]);
        }
      }
    }
  }
}

}  // namespace

namespace {

// A repacked matrix (the AVX2 path's layouts): 16-row tiles as pairs of stored 8-row tiles.
// job.o_begin is a multiple of 16 (matmul's chunks), so a tile's halves are whole 8-row tiles.
template <typename TileT, typename TileFn>
void pair_tiles(const RangeJob& job, int64_t tile8_bytes, int64_t n_steps, TileFn tile_fn) {
  const WeightMatrix& w = *job.w;
  __m512 acc[kRowBlock];  // (kRowBlock) one accumulator per activation row: 16 outputs
  for (int64_t o0 = job.o_begin; o0 < job.o_end; o0 += kLanes) {
    const int n_valid = static_cast<int>(job.o_end - o0 < kLanes ? job.o_end - o0 : kLanes);
    TileT t;
    t.lo = static_cast<const uint8_t*>(w.data) + (o0 / 8) * tile8_bytes;
    t.hi = o0 + 8 < w.n_out ? t.lo + tile8_bytes : t.lo;  // no rows 8-15: read rows 0-7 again
    t.next = t.lo + 2 * tile8_bytes;                       // past the matrix: harmless
    t.step_bytes = 64 * ((2 * tile8_bytes / 64 + n_steps - 1) / n_steps);
    for (int r0 = 0; r0 < job.M; r0 += kRowBlock) {
      const RowBlock rb{&job.acts, r0, min_int(kRowBlock, job.M - r0)};
      for (int r = 0; r < rb.R; ++r) acc[r] = _mm512_setzero_ps();
      tile_fn(t, n_steps, rb, acc);
      store_outputs(acc, rb, job.y, w.n_out, o0, n_valid);
    }
  }
}

}  // namespace

bool matmul_range_tiled_avx512(const RangeJob& job) {
  const WeightMatrix& w = *job.w;
  const int64_t n32 = w.n_in / 32, n256 = w.n_in / 256;  // block iterations: 32-value blocks, super-blocks
  if (w.layout == WeightLayout::Q8_0Tiles8 && w.type == DType::Q8_0) {
    pair_tiles<Q8PairTile>(job, q8_tile_bytes(w.n_in), n32, SPECDEC_TILE(q8_0_tile));
    return true;
  }
  if (w.layout == WeightLayout::Chunks16Tiles8) {
    constexpr int64_t kQ4K = sizeof(quant::BlockQ4_K), kQ5K = sizeof(quant::BlockQ5_K), kQ6K = sizeof(quant::BlockQ6_K);
    switch (w.type) {
      case DType::Q4_K:
        pair_tiles<ChunkPairTile<kQ4K>>(job, n256 * ChunkPairTile<kQ4K>::kStride, n256, SPECDEC_TILE(q45_k_tile<false>));
        return true;
      case DType::Q5_K:
        pair_tiles<ChunkPairTile<kQ5K>>(job, n256 * ChunkPairTile<kQ5K>::kStride, n256, SPECDEC_TILE(q45_k_tile<true>));
        return true;
      case DType::Q6_K:
        pair_tiles<ChunkPairTile<kQ6K>>(job, n256 * ChunkPairTile<kQ6K>::kStride, n256, SPECDEC_TILE(q6_k_tile));
        return true;
      default: return false;
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
