// AVX2 matmul over the legacy 32-value types (Q4_0, Q4_1, Q5_0, Q5_1) repacked as
// Blocks32PairTiles8 (matmul_internal.h, written by repack_rows). Compiled with the AVX2 flags;
// reached only through matmul_range_avx2.
//
// The in-place legacy tile (matmul_tiles_avx2.cpp) transposes every block's nibbles from 8 row
// streams in registers (4 loads, 4 inserts, 8 unpacks) and gathers its d, m and qh, on every
// call. Here the nibbles are stored transposed and d, m and qh as one 16-byte load per field,
// in one sequential stream per tile, prefetched ~4.5 KiB ahead. The values, the exact integer sums per block and the
// float steps are the in-place tile's (see that file's per-row operation order), so every
// output is bit for bit the in-place tile's, for every M, tile and thread:
//   Q4_0, Q5_0: S = sum(q * a_b) - 8 (16) * sum(a_b);  acc = fma(float(S) * da_b, d, acc)
//   Q4_1, Q5_1: S = sum(q * a_b);  f = fma(m, float(sum a_b), float(S) * d);  acc = fma(f, da_b, acc)
//
// M = 1 (decode): each block's values are built and applied to the one row, the accumulator
// in a register. Several rows: a chunk of 16 blocks is built once into an L1 buffer (the
// values, d and m of each block), then rows in groups of at most 4 run over it with their
// accumulators in registers, each buffered vector loaded once per group and applied to its
// rows before the next. The same layout read as the in-place tile reads its blocks (every row
// per block, accumulators in memory) ran 1.15-1.4x slower than in place at M = 9 on Zen 4
// (docs/BENCHMARKS.md section 21a); on a Zen 3 (section 38) that form and these groups ran
// alike, both faster than in place at every M (one thread, Q5_0: 0.45x at M = 1, 0.6-0.75x at
// M = 2-9), and the groups keep the accumulators out of memory.
#include <immintrin.h>

#include <string>

#include "kernels/matmul_avx2_rows.h"
#include "kernels/matmul_internal.h"
#include "specdec/error.h"

namespace specdec::matmul_detail {

namespace {

// One block's weights, built from the stored tile: the 8 vectors (lane L of v[k] = values
// 4k..4k+3 of row L, each < 16, or < 32 with the fifth bit), d and, for Q4_1 / Q5_1, m.
struct LegacyBlock {
  __m256i v[8];
  __m256 d, m;
};

// Unit u (a 2-byte field: d, m, qh's halves) of block b of a tile, 8 rows as 8 uint16.
template <typename F>
inline __m128i legacy_unit(const uint8_t* tile, int64_t b, int64_t u) {
  const uint8_t* pair = tile + (b / 2) * F::kPairBytes;
  return _mm_load_si128(reinterpret_cast<const __m128i*>(pair + 256 + 16 * ((b % 2) * F::kUnits + u)));
}

// Block b of a tile (Blocks32PairTiles8): the in-place legacy tile's values, d and m. The
// nibble split, the fifth bits and legacy_step below repeat lines of that tile on purpose:
// sharing them (helpers in matmul_avx2_rows.h, tried) made GCC inline and allocate the
// in-place file's tiles differently, and its Q6_K decode tile ran 1.35x slower (182 -> 246 µs,
// 2048 x 2048, one thread; docs/BENCHMARKS.md sections 37b and 38e).
template <bool kFiveBit, bool kMin>
inline void build_block(const uint8_t* tile, int64_t b, LegacyBlock& out) {
  using F = LegacyFields<kFiveBit, kMin>;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const uint8_t* qs = tile + (b / 2) * F::kPairBytes + 128 * (b % 2);  // (4 vectors of 32 bytes)
  #pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m256i raw = _mm256_load_si256(reinterpret_cast<const __m256i*>(qs + 32 * k));
    out.v[k] = _mm256_and_si256(raw, low4);
    out.v[4 + k] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
  }
  if constexpr (kFiveBit) {
    // qh as one dword per lane; the fifth bits of v[k] (values 4k..4k+3) are bits 4(k % 2)..+3
    // of qh byte k / 2: that byte is copied to the 4 bytes of its dword and each byte tests its bit.
    constexpr int64_t u = F::kQhOffset / 2;
    const __m256i qh = _mm256_or_si256(_mm256_cvtepu16_epi32(legacy_unit<F>(tile, b, u)),
                                       _mm256_slli_epi32(_mm256_cvtepu16_epi32(legacy_unit<F>(tile, b, u + 1)), 16));
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    const __m256i bit_lo = _mm256_set1_epi32(0x08040201), bit_hi = _mm256_set1_epi32(static_cast<int>(0x80402010u));
    const __m256i dword_base = _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0C0C0C0C, 0, 0x04040404, 0x08080808, 0x0C0C0C0C);
    #pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m256i byte = _mm256_shuffle_epi8(qh, _mm256_add_epi8(dword_base, _mm256_set1_epi8(static_cast<char>(k / 2))));
      const __m256i mask = k % 2 == 0 ? bit_lo : bit_hi;
      out.v[k] = _mm256_or_si256(out.v[k], _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(byte, mask), mask), bit4));
    }
  }
  out.d = _mm256_cvtph_ps(legacy_unit<F>(tile, b, 0));
  if constexpr (kMin) out.m = _mm256_cvtph_ps(legacy_unit<F>(tile, b, 1));
}

// The float step of block b for activation row r of rb, from its exact integer sum S.
template <bool kFiveBit, bool kMin>
inline void legacy_step(__m256i s, const LegacyBlock& w, const RowBlock& rb, int r, int64_t b, __m256& acc) {
  if constexpr (kMin) {
    const __m256 f = _mm256_fmadd_ps(w.m, _mm256_set1_ps(rb.sum32(r, b)), _mm256_mul_ps(_mm256_cvtepi32_ps(s), w.d));
    acc = _mm256_fmadd_ps(f, _mm256_set1_ps(rb.da(r, b)), acc);
  } else {
    constexpr int kNegSumDivisor = kFiveBit ? 8 : 16;  // -128 sum(a) / this = -offset * sum(a)
    scale_block(_mm256_add_epi32(s, _mm256_set1_epi32(rb.neg128_sum32(r, b) / kNegSumDivisor)), rb.da(r, b), w.d, acc);
  }
}

// The pair of blocks about kAheadBytes past block b's (b even), into L1. A thread's tiles are
// one sequential stream, but with the hardware prefetchers alone a Zen 3 read it at half its
// read probe at M = 1 (a 58 MB Q5_0 matrix on 2 cores: 4.2-4.6 ms, 2.8-3.2 with this; several
// rows 0.66-0.86x the time; docs/BENCHMARKS.md section 38). Past the matrix's end: harmless
// (never faults).
constexpr int64_t kAheadBytes = 4608;
template <bool kFiveBit, bool kMin>
[[gnu::always_inline]] inline void prefetch_pair_ahead(const uint8_t* tile, int64_t b) {
  using F = LegacyFields<kFiveBit, kMin>;
  constexpr int64_t kAheadPairs = (kAheadBytes + F::kPairBytes - 1) / F::kPairBytes;  // 12-16
  const char* p = reinterpret_cast<const char*>(tile + (b / 2 + kAheadPairs) * F::kPairBytes);
  #pragma GCC unroll 6
  for (int64_t i = 0; i < F::kPairBytes; i += 64) _mm_prefetch(p + i, _MM_HINT_T0);
}

// M = 1: 8 outputs of one tile for the one row.
template <bool kFiveBit, bool kMin>
__m256 legacy_tile_1row(const uint8_t* tile, int64_t n_blocks, const RowBlock& rb) {
  __m256 acc = _mm256_setzero_ps();
  const int8_t* a = rb.values(0);
  for (int64_t b = 0; b < n_blocks; ++b) {
    if (b % 2 == 0) prefetch_pair_ahead<kFiveBit, kMin>(tile, b);
    LegacyBlock w;
    build_block<kFiveBit, kMin>(tile, b, w);
    const __m256i s = kFiveBit ? five_bit_block_dot(w.v, a + 32 * b) : nibble_block_dot(w.v, a + 32 * b);
    legacy_step<kFiveBit, kMin>(s, w, rb, 0, b, acc);
  }
  return acc;
}

// Blocks built per chunk for the row groups: 16 (5 KiB of LegacyBlock), in L1 with the rows'
// activations while every group runs over them.
constexpr int64_t kChunkBlocks = 16;

// G rows (rb's g0 .. g0 + G - 1) over the built blocks [c0, c1) (chunk[b - c0]), accumulators
// acc[g0 ..] held in registers over the chunk. k outer, rows inner: int16 sums over 4 values'
// vectors (five-bit: <= 4 * 7874) or all 8 (nibbles: <= 8 * 3810), widened by madd, then the
// block's float step: the exact S of five_bit_block_dot / nibble_block_dot. The Avx2Vnni
// builds: two vpdpbusd chains per row (even and odd k) instead, added at the end (the same S).
template <bool kFiveBit, bool kMin, int G>
void legacy_group(const LegacyBlock* chunk, int64_t c0, int64_t c1, const RowBlock& rb, int g0, __m256* acc) {
  const int8_t* a[G];  // (G) the rows' quantized values, (n_pad) each
  __m256 sum[G];       // (G) accumulators: 8 outputs each
  #pragma GCC unroll 4
  for (int r = 0; r < G; ++r) a[r] = rb.values(g0 + r), sum[r] = acc[g0 + r];
  for (int64_t b = c0; b < c1; ++b) {
    const LegacyBlock& w = chunk[b - c0];
#if SPECDEC_AVX2_VNNI
    __m256i s32[G], odd[G];  // (G) int32 sums of the even and odd k: two chains per row (latency)
    #pragma GCC unroll 4
    for (int r = 0; r < G; ++r) s32[r] = odd[r] = _mm256_setzero_si256();
    #pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m256i v = _mm256_load_si256(&w.v[k]);
      #pragma GCC unroll 4
      for (int r = 0; r < G; ++r) {
        __m256i& chain = k % 2 == 0 ? s32[r] : odd[r];
        chain = dpbusd(chain, v, bcast4(a[r] + 32 * b + 4 * k));
        __asm__("" : "+x"(chain));  // chains per row, as below
      }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < G; ++r) s32[r] = _mm256_add_epi32(s32[r], odd[r]);
#else
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i s16[G], s32[G];  // (G) int16 partial sums, int32 sums: 8 lanes each
    #pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m256i v = _mm256_load_si256(&w.v[k]);
      #pragma GCC unroll 4
      for (int r = 0; r < G; ++r) {
        const __m256i p = _mm256_maddubs_epi16(v, bcast4(a[r] + 32 * b + 4 * k));
        s16[r] = k % (kFiveBit ? 4 : 8) == 0 ? p : _mm256_add_epi16(s16[r], p);
        __asm__("" : "+x"(s16[r]));  // a chain per row: GCC otherwise kept all 8 G products live
        if (kFiveBit && k == 3) s32[r] = _mm256_madd_epi16(s16[r], ones);
        if (k == 7) {
          const __m256i wide = _mm256_madd_epi16(s16[r], ones);
          s32[r] = kFiveBit ? _mm256_add_epi32(s32[r], wide) : wide;
        }
      }
    }
#endif
    #pragma GCC unroll 4
    for (int r = 0; r < G; ++r) legacy_step<kFiveBit, kMin>(s32[r], w, rb, g0 + r, b, sum[r]);
  }
  #pragma GCC unroll 4
  for (int r = 0; r < G; ++r) acc[g0 + r] = sum[r];
}

// rb's rows (R >= 2) over a tile: chunk by chunk, the blocks built once, then ceil(R / 4)
// groups as even as possible (5 = 2 + 3, 9 = 3 + 3 + 3).
template <bool kFiveBit, bool kMin>
void legacy_tile_rows(const uint8_t* tile, int64_t n_blocks, const RowBlock& rb, __m256* acc) {
  LegacyBlock chunk[kChunkBlocks];  // (kChunkBlocks) the chunk's built blocks
  const int n_groups = (rb.R + 3) / 4;
  for (int64_t c0 = 0; c0 < n_blocks; c0 += kChunkBlocks) {
    const int64_t c1 = c0 + kChunkBlocks < n_blocks ? c0 + kChunkBlocks : n_blocks;
    for (int64_t b = c0; b < c1; ++b) {
      if (b % 2 == 0) prefetch_pair_ahead<kFiveBit, kMin>(tile, b);
      build_block<kFiveBit, kMin>(tile, b, chunk[b - c0]);
    }
    for (int g = 0, g0 = 0; g < n_groups; ++g) {
      const int size = (rb.R - g0) / (n_groups - g);  // the remaining rows over the remaining groups: 2..4
      switch (size) {
        case 2: legacy_group<kFiveBit, kMin, 2>(chunk, c0, c1, rb, g0, acc); break;
        case 3: legacy_group<kFiveBit, kMin, 3>(chunk, c0, c1, rb, g0, acc); break;
        default: legacy_group<kFiveBit, kMin, 4>(chunk, c0, c1, rb, g0, acc); break;
      }
      g0 += size;
    }
  }
}

template <bool kFiveBit, bool kMin>
void legacy_range(const RangeJob& job) {
  using F = LegacyFields<kFiveBit, kMin>;
  const int64_t n_blocks = job.w->n_in / 32;
  for_each_repacked_tile(job, legacy_tile_bytes(job.w->n_in, F::kBytes), [n_blocks](const uint8_t* tile, const RowBlock& rb, __m256* acc) {
    if (rb.R == 1) {
      acc[0] = legacy_tile_1row<kFiveBit, kMin>(tile, n_blocks, rb);
    } else {
      legacy_tile_rows<kFiveBit, kMin>(tile, n_blocks, rb, acc);
    }
  });
}

}  // namespace

void SPECDEC_AVX2_KERNEL(matmul_range_repacked_legacy_avx2)(const RangeJob& job) {
  switch (job.w->type) {
    case DType::Q4_0: return legacy_range<false, false>(job);
    case DType::Q4_1: return legacy_range<false, true>(job);
    case DType::Q5_0: return legacy_range<true, false>(job);
    case DType::Q5_1: return legacy_range<true, true>(job);
    default: throw Error(std::string("matmul: a Blocks32PairTiles8 matrix of ") + dtype_name(job.w->type));
  }
}

}  // namespace specdec::matmul_detail
