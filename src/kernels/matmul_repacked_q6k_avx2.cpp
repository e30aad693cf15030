// AVX2 matmul over Q6_K matrices repacked as Q6KTiles8 (matmul_internal.h, written by
// repack_rows). Compiled with the AVX2 flags; reached only through matmul_range_avx2.
//
// Why a layout of its own: the Q6_K decode tile over the file's bytes (or their transposed
// chunks) is compute-bound on AVX2. Rebuilding a 6-bit value from its low nibble and its two
// high bits takes 17 operations per 4 vectors of 32 values, about half of a one-row tile
// (docs/BENCHMARKS.md section 39b). Stored as 3 bytes per 4 values, three of them whole, the
// same vectors take 11 operations, and each group's 8 scales are one sign-extending load instead
// of a shift pair on a transposed word. The bytes per super-block are Chunks16Tiles8's.
//
// The values, the exact integer sums per group of 16 and the float steps are the in-place
// tile's (matmul_tiles_avx2.cpp, whose per-row operation order this repeats), so every output
// is bit for bit the in-place tile's, for every M, tile and thread:
//   S0, S1 = sum((u - 32) * a) over the block's two groups of 16 (the -32 sum(a) from
//   neg32_sums16, exact); f = fma(float(S0), d * sc_2b, float(S1) * (d * sc_2b+1));
//   acc = fma(f, da_b, acc).
#include <immintrin.h>

#include "kernels/matmul_avx2_rows.h"
#include "kernels/matmul_internal.h"

namespace specdec::matmul_detail {

namespace {

// The 8 vectors of block j (values 32 j .. 32 j + 31) of a tile's super-block unit: v[k] lane L
// = the 6-bit values u = q + 32 of values 4k..4k+3 of row L. Per group of 16 (h): vectors 0-2
// are the stored bytes' bits 0-5; vector 3 gathers their bits 6-7 (16-bit shifts: every bit a
// shift brings in from the neighbouring byte is masked off).
inline void block_values(const uint8_t* unit, int j, __m256i* v) {
  const __m256i low6 = _mm256_set1_epi8(0x3F), bits01 = _mm256_set1_epi8(0x03);
  const __m256i bits23 = _mm256_set1_epi8(0x0C), bits45 = _mm256_set1_epi8(0x30);
  #pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m256i* e = reinterpret_cast<const __m256i*>(unit + 192 * j + 96 * h);  // (3 vectors)
    const __m256i e0 = _mm256_load_si256(e), e1 = _mm256_load_si256(e + 1), e2 = _mm256_load_si256(e + 2);
    v[4 * h] = _mm256_and_si256(e0, low6);
    v[4 * h + 1] = _mm256_and_si256(e1, low6);
    v[4 * h + 2] = _mm256_and_si256(e2, low6);
    v[4 * h + 3] = _mm256_or_si256(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(e0, 6), bits01),
                                                   _mm256_and_si256(_mm256_srli_epi16(e1, 4), bits23)),
                                   _mm256_and_si256(_mm256_srli_epi16(e2, 2), bits45));
  }
}

// d * sc_g for group g (values 16 g .. 16 g + 15) of every row: the in-place tile's float
// scale (the int8 scale exactly as a float, times d).
inline __m256 group_scale(const uint8_t* unit, __m256 d, int g) {
  const __m128i sc = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(unit + kQ6kScalesOffset + 8 * g));
  return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)));
}

// Weight prefetch; a thread's tiles are one sequential stream (docs/BENCHMARKS.md section 40:
// Q6_K 2048 x 8192 x 6 matrices from memory, 2 threads, paired in one process against the
// Chunks16Tiles8 tile, which prefetches a burst of each super-block 2 ahead into L1 at M = 1 and
// into L2 for several rows):
//  - one row (decode): none; the hardware prefetchers follow the stream. Against the chunk
//    tile: a burst of a unit's 27 lines per unit into L1 1.10-1.14x its time, none 0.99-1.04x;
//    the same lines spread over the unit's 8 blocks, 1.05x the time with none.
//  - several rows: kAheadUnits units ahead into L2, in one burst per unit. With none, 5-9 rows
//    ran 1.3-1.4x the chunk tile's time; any burst into L1 1.2-1.3x; 2 units ahead 1.1-1.2x at
//    2 rows; 6 ahead 0.93-0.98x at 5-9 rows.
// always_inline: GCC 12 counts a function whose only effect is prefetches as free of side
// effects and drops the calls it does not inline.
constexpr int64_t kAheadUnits = 6;
constexpr int64_t kUnitLines = (kQ6kUnitBytes + 63) / 64;  // 27: a unit need not start a line
template <typename RB>
[[gnu::always_inline]] inline void prefetch_unit(const uint8_t* tile, int64_t s) {
  if constexpr (!RB::kOneRow) {
    const char* p = reinterpret_cast<const char*>(tile + (s + kAheadUnits) * kQ6kUnitBytes);
    #pragma GCC unroll 27
    for (int64_t i = 0; i < 64 * kUnitLines; i += 64) _mm_prefetch(p + i, _MM_HINT_T1);
  }
}

// The 8 outputs of one tile (n_super super-blocks at `tile`) for the rows of rb, into acc[0 .. R).
template <typename RB>
void q6k_tile(const uint8_t* tile, int64_t n_super, const RB& rb, __m256* acc) {
  for (int64_t s = 0; s < n_super; ++s) {
    const uint8_t* unit = tile + s * kQ6kUnitBytes;
    prefetch_unit<RB>(tile, s);
    const __m256 d = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(unit + kQ6kDOffset)));
    #pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      __m256i v[8];
      block_values(unit, j, v);
      const __m256 ws0 = group_scale(unit, d, 2 * j), ws1 = group_scale(unit, d, 2 * j + 1);
      const int64_t b = 8 * s + j;
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

}  // namespace

void SPECDEC_AVX2_KERNEL(matmul_range_repacked_q6k_avx2)(const RangeJob& job) {
  const WeightMatrix& w = *job.w;
  const int64_t n_super = w.n_in / 256;
  const int64_t tile_bytes = n_super * kQ6kUnitBytes;
  if (job.M == 1) {  // decode: the accumulator in a register
    const OneRowBlock rb(&job.acts);
    for (int64_t o0 = job.o_begin; o0 < job.o_end; o0 += kLanes) {
      const int n_valid = static_cast<int>(job.o_end - o0 < kLanes ? job.o_end - o0 : kLanes);
      __m256 acc[1] = {_mm256_setzero_ps()};
      q6k_tile(static_cast<const uint8_t*>(w.data) + (o0 / kLanes) * tile_bytes, n_super, rb, acc);
      store_outputs(acc, rb, job.y, w.n_out, o0, n_valid);
    }
    return;
  }
  for_each_repacked_tile(job, tile_bytes, [&](const uint8_t* tile, const RowBlock& rb, __m256* acc) {
    q6k_tile(tile, n_super, rb, acc);
  });
}

}  // namespace specdec::matmul_detail
