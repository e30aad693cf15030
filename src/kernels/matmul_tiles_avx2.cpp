// AVX2 matmul kernels that read quantized weight blocks in place (no unpacked copy), for every
// quantized type (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K): the AVX2
// counterpart of matmul_tiles_avx512.cpp. Compiled with the AVX2 flags; reached only through
// matmul_range_avx2. Only raw pointers cross this file's boundary.
//
// Layout: a tile is 8 weight rows, one per 32-bit vector lane. For each block of 32 weight
// values the 8 rows' bytes are transposed in registers into 8 vectors v[k] whose lane L holds
// values 4k..4k+3 of row L (4x4 dword transposes inside 128-bit lanes, shared by all M
// activation rows). Each activation row then needs, per block, 8 maddubs with its 4 values
// broadcast: lane L accumulates exactly the integer dot product of row L's block, and one
// float step per block scales it. Compared with the unpacking path (matmul_avx2.cpp) this
// drops the per-row copy of every weight row and does one float step per block instead of
// one per 4 values, which is what makes extra activation rows cheap. The Q2_K to Q5_K tiles
// are templates on their source: the in-place Tile, or a ChunkTile over a matrix repacked at
// load (WeightLayout::Chunks16Tiles8), whose transposed chunks are stored (the same bits). A
// repacked Q6_K matrix (Q6KTiles8) has its own kernel, matmul_repacked_q6k_avx2.cpp, with this
// file's Q6_K values and steps.
//
// maddubs multiplies unsigned by signed bytes and saturates pairs to int16 (the Avx2Vnni builds
// of this file multiply with vpdpbusd instead: the same exact sums, matmul_avx2_rows.h), so:
//   Q8_0: |q| times sign(a, q) (pairs <= 2 * 128 * 127, exact), then madd to int32 per k;
//   Q4_0, Q4_1, Q4_K: nibbles 0..15, pairs <= 2 * 15 * 127; all 8 k summed in int16 (<= 30480),
//     one madd;
//   Q5_0, Q5_1, Q5_K: 0..31, pairs <= 2 * 31 * 127; 4 k summed in int16 (<= 31496) per madd;
//   Q6_K: q + 32 in 0..63, pairs <= 2 * 63 * 127; two k summed in int16 (<= 32004) per madd;
//   Q2_K, Q3_K: q in 0..3, q + 4 in 0..7: as Q6_K (far below the bounds).
//
// Per (activation row r, weight row o) operation order, the same for every M, tile position
// and thread count (lanes are independent; activation rows are processed one at a time with
// the same instruction sequence):
//   acc = 0; for each block b of 32 values in order:
//     Q8_0: S = sum(q * a_b);  acc = fma(float(S) * da_b, d_b, acc)
//     Q4_0: S = sum((q - 8) * a_b);  the same step (Q5_0: q - 16)
//     Q4_1, Q5_1: S = sum(q * a_b);  f = fma(m, float(sum a_b), float(S) * d);  acc = fma(f, da_b, acc)
//     Q4_K, Q5_K: S = sum(q * a_b);  f = fma(-dmin * m_b, float(sum a_b), float(S) * (d * sc_b));
//           acc = fma(f, da_b, acc)
//     Q6_K: S0, S1 = sum((q - 32) * a) over the two groups of 16;
//           f = fma(float(S0), d * sc_2b, float(S1) * (d * sc_2b+1)); acc = fma(f, da_b, acc)
//     Q3_K: the Q6_K step with q - 4 and scale - 32;  Q2_K: the same plus the two groups' min
//           terms (see q2_k_tile)
//   y = acc.
// These are the AVX-512 tiles' formulas (matmul_tiles_avx512.cpp, matmul_tiles_small_avx512.cpp),
// so both paths agree to the last bit for every quantized type.
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "kernels/matmul_avx2_rows.h"
#include "kernels/matmul_internal.h"
#include "kernels/matmul_tiles_avx2.h"
#include "kernels/quant_blocks.h"

namespace specdec::matmul_detail {

namespace {

// ---- Q8_0: blocks of 34 bytes (binary16 d, 32 int8 q)
void q8_0_tile(const Tile& t, int64_t n_blocks, const RowBlock& rb, __m256* acc) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t off = b * static_cast<int64_t>(sizeof(quant::BlockQ8_0));
    prefetch_next<true>(t, b);
    __m256i v[8], v_abs[8];
    load_transposed32(t, off + 2, v);
    #pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) v_abs[k] = _mm256_sign_epi8(v[k], v[k]);  // |q| as u8 (-128 -> 128)
    q8_0_block_rows(v, v_abs, gather_half(t, off, 0), rb, b, acc);
  }
}

// ---- The legacy 32-value blocks: binary16 d, for Q4_1/Q5_1 binary16 m, for Q5_0/Q5_1 qh (32
// fifth bits, bit j of the little-endian word for value j), then 16 bytes of nibbles (values
// 0..15 in the low nibbles, 16..31 in the high ones). Weights: Q4_0 d * (q - 8), Q5_0
// d * (q - 16), Q4_1/Q5_1 d * q + m.
//   Q4_0, Q5_0: S = sum(q * a_b) - 8 (16) * sum(a_b), exact (the sum of a_b from
//     neg128_sums32 / 16 (/ 8)); then the Q8_0 step.
//   Q4_1, Q5_1: S = sum(q * a_b); f = fma(m, float(sum a_b), float(S) * d); acc = fma(f, da_b, acc)
//     (the Q4_K step with one scale).
// The fifth bits of v[k] (values 4k..4k+3) are bits 4(k % 2)..+3 of qh byte k / 2: that byte is
// copied to the 4 bytes of its dword and each byte tests its own bit.
template <bool kFiveBit, bool kMin>
void legacy_tile(const Tile& t, int64_t n_blocks, const RowBlock& rb, __m256* acc) {
  using Block = std::conditional_t<kFiveBit, std::conditional_t<kMin, quant::BlockQ5_1, quant::BlockQ5_0>,
                                   std::conditional_t<kMin, quant::BlockQ4_1, quant::BlockQ4_0>>;
  constexpr int64_t kQhOffset = kMin ? 4 : 2;                        // offsetof(Block, qh)
  constexpr int64_t kQsOffset = kQhOffset + (kFiveBit ? 4 : 0);      // offsetof(Block, qs)
  constexpr int kNegSumDivisor = kFiveBit ? 8 : 16;                  // -128 sum(a) / this = -offset * sum(a)
  const __m256i low4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
  const __m256i bit_lo = _mm256_set1_epi32(0x08040201), bit_hi = _mm256_set1_epi32(static_cast<int>(0x80402010u));
  // shuffle control: byte i of dword j (of each 128-bit lane) <- byte 4j + k/2; k/2 added below
  const __m256i dword_base = _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0C0C0C0C, 0, 0x04040404, 0x08080808, 0x0C0C0C0C);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t off = b * static_cast<int64_t>(sizeof(Block));
    prefetch_next<true>(t, b);
    __m256i raw[4], v[8];
    load_transposed16(t, off + kQsOffset, raw);
    #pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_and_si256(raw[k], low4);
      v[4 + k] = _mm256_and_si256(_mm256_srli_epi16(raw[k], 4), low4);
    }
    if constexpr (kFiveBit) {
      const __m256i qh = _mm256_i32gather_epi32(reinterpret_cast<const int*>(t.rows[0] + off + kQhOffset), t.offset, 1);
      #pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        const __m256i byte = _mm256_shuffle_epi8(qh, _mm256_add_epi8(dword_base, _mm256_set1_epi8(static_cast<char>(k / 2))));
        const __m256i mask = k % 2 == 0 ? bit_lo : bit_hi;
        v[k] = _mm256_or_si256(v[k], _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(byte, mask), mask), bit4));
      }
    }
    if constexpr (kMin) {
      const __m256i dm = _mm256_i32gather_epi32(reinterpret_cast<const int*>(t.rows[0] + off), t.offset, 1);
      const __m256 d = half_lanes(dm, 0), m = half_lanes(dm, 16);
      for (int r = 0; r < rb.R; ++r) {
        const int8_t* a = rb.values(r) + 32 * b;
        const __m256i sdot = kFiveBit ? five_bit_block_dot(v, a) : nibble_block_dot(v, a);
        const __m256 f = _mm256_fmadd_ps(m, _mm256_set1_ps(rb.sum32(r, b)), _mm256_mul_ps(_mm256_cvtepi32_ps(sdot), d));
        acc[r] = _mm256_fmadd_ps(f, _mm256_set1_ps(rb.da(r, b)), acc[r]);
      }
    } else {
      const __m256 d = gather_half(t, off, 0);
      for (int r = 0; r < rb.R; ++r) {
        const int8_t* a = rb.values(r) + 32 * b;
        const __m256i sdot = kFiveBit ? five_bit_block_dot(v, a) : nibble_block_dot(v, a);
        const __m256i s = _mm256_add_epi32(sdot, _mm256_set1_epi32(rb.neg128_sum32(r, b) / kNegSumDivisor));
        scale_block(s, rb.da(r, b), d, acc[r]);
      }
    }
  }
}

// ---- Q4_K: super-blocks of 144 bytes: d, dmin (binary16), 12 bytes of packed 6-bit scales and
// mins for 8 sub-blocks of 32, 128 bytes of nibbles (per 64 values: 32 low nibbles, then the
// 32 high nibbles of the same bytes).
// ---- Q5_K (kFiveBit): 176 bytes: the same d, dmin and scales, then qh[32] (bit 2j of qh[l]: the
// fifth bit of value l of sub-block 2j, bit 2j + 1: of sub-block 2j + 1), then the 128 bytes of
// nibbles. The same formulas with q < 32.
template <bool kFiveBit, typename Src, typename RB>
void q45_k_tile(const Src& t, int64_t n_super, const RB& rb, __m256* acc) {
  using Block = std::conditional_t<kFiveBit, quant::BlockQ5_K, quant::BlockQ4_K>;
  constexpr int64_t kQsOffset = kFiveBit ? 48 : 16;  // offsetof(Block, qs)
  const __m256i low4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  const __m256i byte_mask = _mm256_set1_epi32(0xFF);
  for (int64_t s = 0; s < n_super; ++s) {
    const auto sb = super_block(t, s, static_cast<int64_t>(sizeof(Block)));
    prefetch_next<RB::kPrefetchIntoL1>(t, s);
    __m256i h[4];  // h[0]: d | dmin << 16; h[1..3]: packed scale bytes 0-3, 4-7, 8-11
    load_transposed16(sb, 0, h);
    const __m256 d = half_lanes(h[0], 0);
    // The vpdpbusd builds take Q4_K's high nibbles in place (16 q, one op instead of a shift
    // and a mask) with d / 16, as the AVX-512 tiles do (matmul_kquant_blocks_avx512.h: the same
    // bits); vpmaddubsw's int16 pairs could not hold 16 q * a.
    constexpr bool kHighInPlace = SPECDEC_AVX2_VNNI && !kFiveBit;
    [[maybe_unused]] const __m256 d16 = _mm256_mul_ps(d, _mm256_set1_ps(0.0625f));  // exact: a power of two
    const __m256 neg_dmin = _mm256_sub_ps(_mm256_setzero_ps(), half_lanes(h[0], 16));
    const __m256i m6 = _mm256_set1_epi8(0x3F), m4 = _mm256_set1_epi8(0x0F), m45 = _mm256_set1_epi8(0x30);
    // bytes j of sc_lo/m_lo: sub-block j < 4; of sc_hi/m_hi: sub-block 4 + j
    const __m256i sc_lo = _mm256_and_si256(h[1], m6), m_lo = _mm256_and_si256(h[2], m6);
    const __m256i sc_hi = _mm256_or_si256(_mm256_and_si256(h[3], m4), _mm256_and_si256(_mm256_srli_epi32(h[1], 2), m45));
    const __m256i m_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(h[3], 4), m4),
                                         _mm256_and_si256(_mm256_srli_epi32(h[2], 2), m45));
    __m256i qh[8];  // Q5_K: qh[k] lane L = qh bytes 4k..4k+3 of row L (values 4k..4k+3 of each sub-block)
    if constexpr (kFiveBit) {
      load_transposed32(sb, 16, qh);
    }
    #pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {  // 64 values: sub-blocks 2j (low nibbles) and 2j + 1 (high)
      __m256i raw[8];
      load_transposed32(sb, kQsOffset + 32 * j, raw);
      #pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        const int sub = 2 * j + half;
        const __m256i scb = sub < 4 ? sc_lo : sc_hi, mb = sub < 4 ? m_lo : m_hi;
        const int shift = 8 * (sub % 4);
        const __m256 ws = _mm256_mul_ps(kHighInPlace && half == 1 ? d16 : d,
                                        _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(scb, shift), byte_mask)));
        const __m256 wm = _mm256_mul_ps(neg_dmin, _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(mb, shift), byte_mask)));
        __m256i v[8];
        #pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          if constexpr (kHighInPlace) {
            v[k] = _mm256_and_si256(raw[k], half == 0 ? low4 : _mm256_set1_epi8(static_cast<char>(0xF0)));
          } else {
            v[k] = half == 0 ? _mm256_and_si256(raw[k], low4) : _mm256_and_si256(_mm256_srli_epi16(raw[k], 4), low4);
          }
          if constexpr (kFiveBit)  // bit `sub` of each qh byte -> bit 4 (shifts stay inside bytes after the mask)
            v[k] = _mm256_or_si256(v[k], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh[k], sub), one), 4));
        }
        const int64_t b = 8 * s + sub;
        for (int r = 0; r < rb.R; ++r) {
          const int8_t* a = rb.values(r) + 32 * b;
          const __m256i sdot = kFiveBit ? five_bit_block_dot(v, a) : nibble_block_dot(v, a);
          const __m256 f = _mm256_fmadd_ps(wm, _mm256_set1_ps(rb.sum32(r, b)), _mm256_mul_ps(_mm256_cvtepi32_ps(sdot), ws));
          acc[r] = _mm256_fmadd_ps(f, _mm256_set1_ps(rb.da(r, b)), acc[r]);
        }
      }
    }
  }
}

// ---- Q6_K: super-blocks of 210 bytes: ql[128] (low 4 bits), qh[64] (high 2 bits), 16 int8
// scales (one per 16 values), binary16 d. Per 128 values n: value l (l < 32) is ql[64n + l] low
// nibble | (qh[32n + l] bits 0-1) << 4; l + 32: ql[64n + 32 + l] low | qh bits 2-3; l + 64:
// ql[64n + l] high | qh bits 4-5; l + 96: ql[64n + 32 + l] high | qh bits 6-7; minus 32.
template <typename Src, typename RB>
void q6_k_tile(const Src& t, int64_t n_super, const RB& rb, __m256* acc) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
  for (int64_t s = 0; s < n_super; ++s) {
    const auto sb = super_block(t, s, static_cast<int64_t>(sizeof(quant::BlockQ6_K)));
    prefetch_next<RB::kPrefetchIntoL1>(t, s);
    const __m256 d = gather_half(sb, 206, 16);  // d is the last 2 bytes of the block
    __m256i sc[4];  // sc[q] lane L: scales 4q..4q+3 of row L
    load_transposed16(sb, 192, sc);
    #pragma GCC unroll 2
    for (int n = 0; n < 2; ++n) {
      __m256i ql_a[8], ql_c[8], qh[8];
      load_transposed32(sb, 64 * n, ql_a);
      load_transposed32(sb, 64 * n + 32, ql_c);
      load_transposed32(sb, 128 + 32 * n, qh);
      #pragma GCC unroll 4
      for (int part = 0; part < 4; ++part) {  // 32 values: groups 8n + 2 part, + 1
        __m256i v[8];
        #pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          const __m256i lo = part % 2 == 0 ? ql_a[k] : ql_c[k];
          const __m256i nib = part < 2 ? _mm256_and_si256(lo, low4) : _mm256_and_si256(_mm256_srli_epi16(lo, 4), low4);
          __m256i hi;
          switch (part) {
            case 0: hi = _mm256_slli_epi16(qh[k], 4); break;
            case 1: hi = _mm256_slli_epi16(qh[k], 2); break;
            case 2: hi = qh[k]; break;
            default: hi = _mm256_srli_epi16(qh[k], 2); break;
          }
          v[k] = _mm256_or_si256(nib, _mm256_and_si256(hi, bits45));
        }
        const int g0 = 8 * n + 2 * part;  // group index within the super-block
        // int8 scale of group g: byte g % 4 of sc[g / 4], sign-extended
        const __m256 ws0 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_srai_epi32(
            _mm256_slli_epi32(sc[g0 / 4], 24 - 8 * (g0 % 4)), 24)));
        const __m256 ws1 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_srai_epi32(
            _mm256_slli_epi32(sc[(g0 + 1) / 4], 24 - 8 * ((g0 + 1) % 4)), 24)));
        const int64_t b = 8 * s + 4 * n + part;
        for (int r = 0; r < rb.R; ++r) {
          const int8_t* a = rb.values(r) + 32 * b;
          const __m256i s0 = six_bit_group_dot(v, a, _mm256_set1_epi32(rb.neg32_sum16(r, 2 * b)));
          const __m256i s1 = six_bit_group_dot(v + 4, a + 16, _mm256_set1_epi32(rb.neg32_sum16(r, 2 * b + 1)));
          const __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), ws0, _mm256_mul_ps(_mm256_cvtepi32_ps(s1), ws1));
          acc[r] = _mm256_fmadd_ps(f, _mm256_set1_ps(rb.da(r, b)), acc[r]);
        }
      }
    }
  }
}

// v[k] = the 2-bit values 4k..4k+3 of part `part` (0..3) of 128 packed values: bits 2 part of
// each byte of qs[k] (Q2_K's values, Q3_K's low bits).
inline void two_bit_values(const __m256i* qs, int part, __m256i* v) {
  const __m256i two_bits = _mm256_set1_epi8(3);
  #pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) v[k] = _mm256_and_si256(_mm256_srli_epi16(qs[k], 2 * part), two_bits);
}

// ---- Q3_K: super-blocks of 110 bytes: hmask[32], qs[64], 12 bytes of packed 6-bit scales, binary16
// d. Value i = 128n + 32p + l: low 2 bits at bits 2p of qs[32n + l], bit 2 at bit 4n + p of
// hmask[l]; w = d * (scale_g - 32) * (u - 4), u = low | bit2 << 2 in 0..7, g = i / 16. Scale g:
// low nibble in scales[g % 8] (high nibble for g >= 8), top 2 bits at bits 2(g / 4) of
// scales[8 + g % 4]. As Q6_K: S0, S1 = sum((u - 4) * a) over the two groups of 16 (the -4 sum(a)
// from neg32_sums16 / 8, exact); f = fma(float(S0), d * sc_2b, float(S1) * (d * sc_2b+1));
// acc = fma(f, da_b, acc).
// Src: the in-place Tile or a ChunkTile (repacked: Chunks16Tiles8), read through the super-block
// accessors, so the same values and scales (the same bits). q3_k_scale_words: scale bytes 0-3,
// 4-7, 8-11 (aux[0..2], one dword per lane) and d; in place from one transposed 16-byte load
// at byte 94 (qs[62..63], scales, d), repacked from the tail's units.
inline __m256 q3_k_scale_words(const SuperBlock<Tile>& u, __m256i* aux) {
  __m256i x[4];  // bytes 94..109 of each block: qs[62..63], scales[0..11], d
  load_transposed16(u, 94, x);
  #pragma GCC unroll 3
  for (int i = 0; i < 3; ++i) aux[i] = _mm256_or_si256(_mm256_srli_epi32(x[i], 16), _mm256_slli_epi32(x[i + 1], 16));
  return half_lanes(x[3], 16);
}
template <int64_t kBlock>
inline __m256 q3_k_scale_words(const ChunkSuperBlock<kBlock>& u, __m256i* aux) {
  #pragma GCC unroll 3
  for (int i = 0; i < 3; ++i) aux[i] = gather_dword(u, 96 + 4 * i);
  return gather_half(u, 108, 0);
}

template <typename Src, typename RB>
void q3_k_tile(const Src& t, int64_t n_super, const RB& rb, __m256* acc) {
  const __m256i one = _mm256_set1_epi8(1);
  const __m256i m4 = _mm256_set1_epi32(0x0F0F0F0F), m2 = _mm256_set1_epi32(0x03030303), bias = _mm256_set1_epi32(32);
  for (int64_t s = 0; s < n_super; ++s) {
    const auto sb = super_block(t, s, static_cast<int64_t>(sizeof(quant::BlockQ3_K)));
    prefetch_next<RB::kPrefetchIntoL1>(t, s);  // the in-place Tile: into L1 at every M
    __m256i aux[3];  // aux[q] lane L: scale bytes 4q..4q+3 of row L
    const __m256 d = q3_k_scale_words(sb, aux);
    const __m256i aux0 = aux[0], aux1 = aux[1], aux2 = aux[2];
    __m256i sc[4];  // sc[q] lane L byte j: 6-bit scale 4q + j of row L (stored + 32)
    sc[0] = _mm256_or_si256(_mm256_and_si256(aux0, m4), _mm256_slli_epi32(_mm256_and_si256(aux2, m2), 4));
    sc[1] = _mm256_or_si256(_mm256_and_si256(aux1, m4), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(aux2, 2), m2), 4));
    sc[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(aux0, 4), m4),
                            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(aux2, 4), m2), 4));
    sc[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(aux1, 4), m4),
                            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(aux2, 6), m2), 4));
    __m256i hm[8];  // hm[k] lane L: hmask bytes 4k..4k+3 of row L
    load_transposed32(sb, 0, hm);
    #pragma GCC unroll 2
    for (int n = 0; n < 2; ++n) {
      __m256i qs[8];
      load_transposed32(sb, 32 + 32 * n, qs);
      #pragma GCC unroll 4
      for (int part = 0; part < 4; ++part) {  // 32 values: groups 8n + 2 part, + 1
        __m256i v[8];
        two_bit_values(qs, part, v);
        #pragma GCC unroll 8
        for (int k = 0; k < 8; ++k)  // | bit 4n + part of the hmask byte, as bit 2
          v[k] = _mm256_or_si256(v[k], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm[k], 4 * n + part), one), 2));
        const int g0 = 8 * n + 2 * part;
        const __m256 ws0 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(lane_byte(sc, g0), bias)));
        const __m256 ws1 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(lane_byte(sc, g0 + 1), bias)));
        const int64_t b = 8 * s + 4 * n + part;
        for (int r = 0; r < rb.R; ++r) {
          const int8_t* a = rb.values(r) + 32 * b;
          const __m256i s0 = six_bit_group_dot(v, a, _mm256_set1_epi32(rb.neg32_sum16(r, 2 * b) / 8));
          const __m256i s1 = six_bit_group_dot(v + 4, a + 16, _mm256_set1_epi32(rb.neg32_sum16(r, 2 * b + 1) / 8));
          const __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), ws0, _mm256_mul_ps(_mm256_cvtepi32_ps(s1), ws1));
          acc[r] = _mm256_fmadd_ps(f, _mm256_set1_ps(rb.da(r, b)), acc[r]);
        }
      }
    }
  }
}

// ---- Q2_K: super-blocks of 84 bytes: scales[16] (4-bit scale | 4-bit min << 4 per group of 16),
// qs[64] (2-bit values packed as Q3_K's low bits), binary16 d, dmin; w = d * sc_g * q - dmin * m_g.
// S0, S1 = sum(q * a) over the two groups of 16, n0, n1 = their sums of a (exact integers from
// neg32_sums16 / -32); f = fma(-dmin * m_2b, n0, fma(-dmin * m_2b+1, n1, fma(float(S0), d * sc_2b,
// float(S1) * (d * sc_2b+1)))); acc = fma(f, da_b, acc).
// Src: as q3_k_tile's.
template <typename Src, typename RB>
void q2_k_tile(const Src& t, int64_t n_super, const RB& rb, __m256* acc) {
  const __m256i nibble = _mm256_set1_epi32(0xF);
  for (int64_t s = 0; s < n_super; ++s) {
    const auto sb = super_block(t, s, static_cast<int64_t>(sizeof(quant::BlockQ2_K)));
    prefetch_next<RB::kPrefetchIntoL1>(t, s);  // the in-place Tile: into L1 at every M
    __m256i scb[4];  // scb[q] lane L byte j: scales[4q + j] of row L
    load_transposed16(sb, 0, scb);
    const __m256i dm = gather_dword(sb, 80);  // d | dmin << 16
    const __m256 d = half_lanes(dm, 0);
    const __m256 neg_dmin = _mm256_sub_ps(_mm256_setzero_ps(), half_lanes(dm, 16));
    #pragma GCC unroll 2
    for (int n = 0; n < 2; ++n) {
      __m256i qs[8];
      load_transposed32(sb, 16 + 32 * n, qs);
      #pragma GCC unroll 4
      for (int part = 0; part < 4; ++part) {  // 32 values: groups 8n + 2 part, + 1
        __m256i v[8];
        two_bit_values(qs, part, v);
        const int g0 = 8 * n + 2 * part;
        const __m256i byte0 = lane_byte(scb, g0), byte1 = lane_byte(scb, g0 + 1);
        const __m256 ws0 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_and_si256(byte0, nibble)));
        const __m256 ws1 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_and_si256(byte1, nibble)));
        const __m256 wm0 = _mm256_mul_ps(neg_dmin, _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(byte0, 4), nibble)));
        const __m256 wm1 = _mm256_mul_ps(neg_dmin, _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(byte1, 4), nibble)));
        const int64_t b = 8 * s + 4 * n + part;
        for (int r = 0; r < rb.R; ++r) {
          const int8_t* a = rb.values(r) + 32 * b;
          const __m256i s0 = six_bit_group_dot(v, a, _mm256_setzero_si256());
          const __m256i s1 = six_bit_group_dot(v + 4, a + 16, _mm256_setzero_si256());
          const float n0 = static_cast<float>(rb.neg32_sum16(r, 2 * b) / -32);
          const float n1 = static_cast<float>(rb.neg32_sum16(r, 2 * b + 1) / -32);
          __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), ws0, _mm256_mul_ps(_mm256_cvtepi32_ps(s1), ws1));
          f = _mm256_fmadd_ps(wm0, _mm256_set1_ps(n0), _mm256_fmadd_ps(wm1, _mm256_set1_ps(n1), f));
          acc[r] = _mm256_fmadd_ps(f, _mm256_set1_ps(rb.da(r, b)), acc[r]);
        }
      }
    }
  }
}

// A Chunks16Tiles8 matrix: the same tile functions over the stored chunks. One sequential stream
// per thread; prefetched 2 super-blocks ahead into L1 for one row (~2.3 KiB of Q4_K), and about
// 8 KiB ahead into L2 for several (as the AVX-512 tiles' VerifyPrefetch::Far): on a Zen 4 VM
// (docs/BENCHMARKS.md 51) the 1B layers' Q4_K matmuls from memory at M = 2 took 0.72x the time
// of 2 super-blocks ahead with vpdpbusd products and 0.84x with vpmaddubsw, M = 5 0.86x and
// 0.95x, M = 9 the same (medians of 6 alternating rounds for vpdpbusd). M = 1 (decode) runs as
// a OneRowBlock in its own flattened loop, its accumulator in a register (as the AVX-512
// tiles).
template <int64_t kBlock>
ChunkTile<kBlock> chunk_tile(const WeightMatrix& w, int64_t o0, int n_rows) {
  constexpr int64_t kStride = ChunkTile<kBlock>::kStride, kFarBytes = 8192;
  ChunkTile<kBlock> t;
  t.base = static_cast<const uint8_t*>(w.data) + (o0 / kLanes) * (w.n_in / 256) * kStride;
  t.prefetch_ahead = n_rows == 1 ? 2 * kStride : (kFarBytes + kStride - 1) / kStride * kStride;
  return t;
}

template <int64_t kBlock, typename TileFn>
[[gnu::flatten, gnu::noinline]] void chunk_tiles_one_row(const RangeJob& job, TileFn& tile_fn) {
  const OneRowBlock rb(&job.acts);
  for (int64_t o0 = job.o_begin; o0 < job.o_end; o0 += kLanes) {
    const int n_valid = static_cast<int>(job.o_end - o0 < kLanes ? job.o_end - o0 : kLanes);
    __m256 acc[1] = {_mm256_setzero_ps()};
    tile_fn(chunk_tile<kBlock>(*job.w, o0, 1), job.w->n_in / 256, rb, acc);
    store_outputs(acc, rb, job.y, job.w->n_out, o0, n_valid);
  }
}

template <int64_t kBlock, typename TileFn>
[[gnu::noinline]] void chunk_tiles(const RangeJob& job, TileFn tile_fn) {
  if (job.M == 1) return chunk_tiles_one_row<kBlock>(job, tile_fn);
  const WeightMatrix& w = *job.w;
  __m256 acc[kRowBlock];  // (kRowBlock) one accumulator per activation row: 8 outputs
  for (int64_t o0 = job.o_begin; o0 < job.o_end; o0 += kLanes) {
    const int n_valid = static_cast<int>(job.o_end - o0 < kLanes ? job.o_end - o0 : kLanes);
    const ChunkTile<kBlock> t = chunk_tile<kBlock>(w, o0, job.M);
    for (int r0 = 0; r0 < job.M; r0 += kRowBlock) {
      const RowBlock rb{&job.acts, r0, min_int(kRowBlock, job.M - r0)};
      for (int r = 0; r < rb.R; ++r) acc[r] = _mm256_setzero_ps();
      tile_fn(t, w.n_in / 256, rb, acc);
      store_outputs(acc, rb, job.y, w.n_out, o0, n_valid);
    }
  }
}

}  // namespace

bool SPECDEC_AVX2_KERNEL(matmul_range_tiled_avx2)(const RangeJob& job) {
  const WeightMatrix& w = *job.w;
  const DType type = w.type;
  if (w.layout == WeightLayout::Chunks16Tiles8) {
    switch (type) {
// A tile function as a generic lambda (for RowBlock and OneRowBlock), as matmul_tiles_avx512.h's SPECDEC_TILE.
#define SPECDEC_TILE8(...) [](const auto& t, int64_t n, const auto& rb, __m256* acc) { __VA_ARGS__(t, n, rb, acc); }
      case DType::Q4_K: chunk_tiles<sizeof(quant::BlockQ4_K)>(job, SPECDEC_TILE8(q45_k_tile<false>)); return true;
      case DType::Q5_K: chunk_tiles<sizeof(quant::BlockQ5_K)>(job, SPECDEC_TILE8(q45_k_tile<true>)); return true;
      case DType::Q2_K: chunk_tiles<sizeof(quant::BlockQ2_K)>(job, SPECDEC_TILE8(q2_k_tile)); return true;
      case DType::Q3_K: chunk_tiles<sizeof(quant::BlockQ3_K)>(job, SPECDEC_TILE8(q3_k_tile)); return true;
#undef SPECDEC_TILE8
      default: return false;
    }
  }
  const bool blocks32 = type == DType::Q8_0 || type == DType::Q4_0 || type == DType::Q4_1 || type == DType::Q5_0 ||
                        type == DType::Q5_1;
  if (!blocks32 && type != DType::Q2_K && type != DType::Q3_K && type != DType::Q4_K && type != DType::Q5_K && type != DType::Q6_K) return false;
  __m256 acc[kRowBlock];  // (kRowBlock) one accumulator per activation row: 8 outputs
  const int64_t step_bytes = tile_step_bytes(w, blocks32 ? w.n_in / 32 : w.n_in / 256);  // per block iteration
  for (int64_t o0 = job.o_begin; o0 < job.o_end; o0 += kLanes) {
    const int n_valid = static_cast<int>(job.o_end - o0 < kLanes ? job.o_end - o0 : kLanes);
    const Tile t = make_tile(w, o0, n_valid, step_bytes);
    for (int r0 = 0; r0 < job.M; r0 += kRowBlock) {
      const RowBlock rb{&job.acts, r0, min_int(kRowBlock, job.M - r0)};
      for (int r = 0; r < rb.R; ++r) acc[r] = _mm256_setzero_ps();
      switch (type) {
        case DType::Q8_0: q8_0_tile(t, w.n_in / 32, rb, acc); break;
        case DType::Q4_0: legacy_tile<false, false>(t, w.n_in / 32, rb, acc); break;
        case DType::Q4_1: legacy_tile<false, true>(t, w.n_in / 32, rb, acc); break;
        case DType::Q5_0: legacy_tile<true, false>(t, w.n_in / 32, rb, acc); break;
        case DType::Q5_1: legacy_tile<true, true>(t, w.n_in / 32, rb, acc); break;
        case DType::Q2_K: q2_k_tile(t, w.n_in / 256, rb, acc); break;
        case DType::Q3_K: q3_k_tile(t, w.n_in / 256, rb, acc); break;
        case DType::Q4_K: q45_k_tile<false>(t, w.n_in / 256, rb, acc); break;
        case DType::Q5_K: q45_k_tile<true>(t, w.n_in / 256, rb, acc); break;
        default: q6_k_tile(t, w.n_in / 256, rb, acc); break;
      }
      store_outputs(acc, rb, job.y, w.n_out, o0, n_valid);
    }
  }
  return true;
}

}  // namespace specdec::matmul_detail
