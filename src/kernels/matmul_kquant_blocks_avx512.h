// kernels/matmul_kquant_blocks_avx512.h — the AVX-512 K-quant block decoders (Q4_K, Q5_K,
// Q6_K read from a tile of matmul_tiles_avx512.h) shared by the VNNI tiles
// (matmul_tiles_avx512.cpp) and the AMX tiles (matmul_tiles_amx.cpp), and the Q6_K per-block
// step shared by the in-place and repacked (matmul_repacked_q6k_avx512.cpp) VNNI tiles. Include
// only from translation units compiled with the AVX-512 flags (internal linkage, as that header).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "kernels/matmul_internal.h"
#include "kernels/matmul_tiles_avx512.h"
#include "kernels/quant_blocks.h"

namespace specdec::matmul_detail {
namespace {

// ---- Block decoders shared by the VNNI tiles (matmul_tiles_avx512.cpp) and the AMX tiles
// (matmul_tiles_amx.cpp), so both multiply the same integers and scale them with the same
// float values. Each decodes one super-block of a tile (16 weight rows) and calls
// fn(index, v, scales...) once per block of 32 values, in order, with v[k] lane L = values
// 4k..4k+3 of row L's block.

// Q4_K: super-blocks of 144 bytes: d, dmin (binary16), 12 bytes of packed 6-bit scales and
// mins for 8 sub-blocks of 32, 128 bytes of nibbles (per 64 values: 32 low nibbles, then the
// 32 high nibbles of the same bytes).
// Q5_K (kFiveBit): 176 bytes: the same d, dmin and scales, then qh[32] (bit `sub` of qh[l]:
// the fifth bit of value l of sub-block `sub`), then the 128 bytes of nibbles.
// fn(sub, v, ws, wm) per sub-block: v[8] the values q (0..15, 0..31) as u8, ws = d * sc_sub,
// wm = -dmin * m_sub; the block's dot is  wm * sum(a) + ws * sum(q * a)  (matmul_tiles_avx2.cpp's
// q45_k_tile: the same bits). Q4_K's odd sub-blocks (high nibbles) come as 16 q, masked in place
// (one op instead of a shift and a mask), with ws = (d / 16) * sc_sub: float(16 S) * ((d / 16) * sc)
// rounds the same real number as float(S) * (d * sc) (|16 S| < 2^24 converts exactly; scaling by
// 16 commutes with rounding), so the bits are unchanged.
template <bool kFiveBit, typename TileT, typename Fn>
inline void q45_k_sub_blocks(const TileT& t, int64_t s, Fn&& fn) {
  using Block = std::conditional_t<kFiveBit, quant::BlockQ5_K, quant::BlockQ4_K>;
  constexpr int64_t kQsOffset = kFiveBit ? 48 : 16;  // offsetof(Block, qs)
  const __m512i low4 = _mm512_set1_epi8(0x0F), high4 = _mm512_set1_epi8(static_cast<char>(0xF0));
  const __m512i bit4 = _mm512_set1_epi8(0x10);
  const auto sb = super_block(t, s, static_cast<int64_t>(sizeof(Block)));
  __m512i h[4];  // h[0]: d | dmin << 16; h[1..3]: packed scale bytes 0-3, 4-7, 8-11
  load_transposed16(sb, 0, h);
  const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h[0]));
  const __m512 d16 = _mm512_mul_ps(d, _mm512_set1_ps(0.0625f));  // exact: a power of two
  const __m512 neg_dmin = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h[0], 16))));
  const __m512i m6 = _mm512_set1_epi8(0x3F), m4 = _mm512_set1_epi8(0x0F), m45 = _mm512_set1_epi8(0x30);
  // bytes j of sc_lo/m_lo: sub-block j < 4; of sc_hi/m_hi: sub-block 4 + j
  const __m512i sc_lo = _mm512_and_si512(h[1], m6), m_lo = _mm512_and_si512(h[2], m6);
  const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(h[3], m4), _mm512_and_si512(_mm512_srli_epi32(h[1], 2), m45));
  const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(h[3], 4), m4),
                                       _mm512_and_si512(_mm512_srli_epi32(h[2], 2), m45));
  __m512i qh[8];  // Q5_K: qh[k] lane L = qh bytes 4k..4k+3 of row L (values 4k..4k+3 of each sub-block)
  if constexpr (kFiveBit) {
    load_transposed32(sb, 16, qh);
  }
  #pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {  // 64 values: sub-blocks 2j (low nibbles) and 2j + 1 (high)
    __m512i raw[8];
    load_transposed32(sb, kQsOffset + 32 * j, raw);
    #pragma GCC unroll 16
    for (int half = 0; half < 2; ++half) {
      const int sub = 2 * j + half;
      const __m512i scb = sub < 4 ? sc_lo : sc_hi, mb = sub < 4 ? m_lo : m_hi;
      const int shift = 8 * (sub % 4);
      const __m512i byte_mask = _mm512_set1_epi32(0xFF);
      // Q4_K's high nibbles stay in place (16 q): d / 16 makes the product the same bits.
      const __m512 ws = _mm512_mul_ps(!kFiveBit && half == 1 ? d16 : d,
                                      _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(scb, static_cast<unsigned>(shift)), byte_mask)));
      const __m512 wm = _mm512_mul_ps(neg_dmin, _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(mb, static_cast<unsigned>(shift)), byte_mask)));
      __m512i v[8];
      #pragma GCC unroll 16
      for (int k = 0; k < 8; ++k) {
        if constexpr (kFiveBit) {  // bytes whose qh bit `sub` is set get 16 (bit 4 is clear)
          v[k] = half == 0 ? _mm512_and_si512(raw[k], low4) : _mm512_and_si512(_mm512_srli_epi16(raw[k], 4), low4);
          const __mmask64 set = _mm512_test_epi8_mask(qh[k], _mm512_set1_epi8(static_cast<char>(1 << sub)));
          v[k] = _mm512_mask_add_epi8(v[k], set, v[k], bit4);
        } else {
          v[k] = _mm512_and_si512(raw[k], half == 0 ? low4 : high4);
        }
      }
      fn(sub, v, ws, wm);
    }
  }
}

// Q6_K: super-blocks of 210 bytes: ql[128] (low 4 bits), qh[64] (high 2 bits), 16 int8
// scales (one per 16 values), binary16 d. Per 128 values n: value l (l < 32) is ql[64n + l] low
// nibble | (qh[32n + l] bits 0-1) << 4; l + 32: ql[64n + 32 + l] low | qh bits 2-3; l + 64:
// ql[64n + l] high | qh bits 4-5; l + 96: ql[64n + 32 + l] high | qh bits 6-7; minus 32.
// fn(block, v, ws0, ws1) per block of 32 (groups 2 block, 2 block + 1): v[8] the values q + 32
// (0..63) as u8, v[0..3] the first group's; ws0, ws1 = d * the groups' scales. The block's dot is
// ws0 * sum((q + 32 - 32) * a over group 0) + ws1 * (the same over group 1). The file's bytes
// (in place: the VNNI tiles without a repacked copy, and the AMX tiles); repacked Q6_K is
// Q6KTiles16, read by matmul_repacked_q6k_avx512.cpp with the same values and scales.
template <typename TileT, typename Fn>
inline void q6_k_blocks(const TileT& t, int64_t s, Fn&& fn) {
  const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
  const auto sb = super_block(t, s, static_cast<int64_t>(sizeof(quant::BlockQ6_K)));
  const __m512 d = gather_half(sb, 206, 16);  // d is the last 2 bytes of the block
  __m512i sc[4];  // sc[q] lane L: scales 4q..4q+3 of row L
  load_transposed16(sb, 192, sc);
  #pragma GCC unroll 2
  for (int n = 0; n < 2; ++n) {
    __m512i ql_a[8], ql_c[8], qh[8];
    load_transposed32(sb, 64 * n, ql_a);
    load_transposed32(sb, 64 * n + 32, ql_c);
    load_transposed32(sb, 128 + 32 * n, qh);
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
      fn(4 * n + part, v, ws0, ws1);
    }
  }
}

// acc + the int32 at p broadcast (vpaddd with an embedded-broadcast memory operand): a Q6_K
// group's -32 * sum(a) added after its products, instead of starting the chain from a
// vpbroadcastd of it (layer_calls/Q6_K/M:9 0.95x as long on a Zen 5 VM, BENCHMARKS 45e).
inline __m512i add_bcast(__m512i acc, const int32_t* p) {
  __asm__("vpaddd %[p]%{1to16%}, %[acc], %[acc]" : [acc] "+v"(acc) : [p] "m"(*p));
  return acc;
}

// The Q6_K step of block b for the rows of rb (v: the block's values u = q + 32, ws0 and ws1
// its groups' d * scale), shared by q6_k_tile (matmul_tiles_avx512.cpp) and the Q6KTiles16
// kernel (matmul_repacked_q6k_avx512.cpp), so the same bits:
//   S0, S1 = sum(u * a) - 32 sum(a) per group of 16 (exact); f = fma(float(S0), ws0, float(S1) * ws1);
//   acc = fma(f, da_b, acc).
template <typename RB>
[[gnu::always_inline]] inline void q6_k_block_rows(const __m512i* v, __m512 ws0, __m512 ws1, int64_t b, const RB& rb,
                                                   __m512* acc) {
  for (int r = 0; r < rb.R; ++r) {
    const int8_t* a = rb.values(r) + 32 * b;
    const __m512i s0 = add_bcast(group_dot(v, a, _mm512_setzero_si512()), rb.neg32_sum16_ptr(r, 2 * b));
    const __m512i s1 = add_bcast(group_dot(v + 4, a + 16, _mm512_setzero_si512()), rb.neg32_sum16_ptr(r, 2 * b + 1));
    const __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), ws0, _mm512_mul_ps(_mm512_cvtepi32_ps(s1), ws1));
    acc[r] = _mm512_fmadd_ps(f, _mm512_set1_ps(rb.da(r, b)), acc[r]);
  }
}

}  // namespace
}  // namespace specdec::matmul_detail
