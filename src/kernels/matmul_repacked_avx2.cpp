// AVX2 matmul over a Q8_0 matrix repacked into the Q8_0Tiles8 layout (matmul_internal.h,
// written by repack_rows). Compiled with the AVX2 flags; reached only through matmul_range_avx2.
//
// The in-place Q8_0 tile (matmul_tiles_avx2.cpp) builds, for each block of 32 values of 8 rows,
// the 8 transposed vectors v[k] (8 loads, 8 inserts, 16 unpacks) and gathers the 8 scales.
// Here those vectors are stored as they are needed: per block, 8 aligned 32-byte loads and one
// 16-byte load of the scales. Each output gets the in-place tile's exact integer sum per block
// and the same float step (q8_0_block_rows), so every output is bit for bit the in-place
// tile's, for every M, tile and thread; several rows run in groups (q8_0_repacked_group).
// A thread's range is one sequential stream (tiles are contiguous), which the hardware
// prefetchers follow; pairs further ahead are also prefetched explicitly.
#include <immintrin.h>

#include "kernels/matmul_avx2_rows.h"
#include "kernels/matmul_internal.h"

namespace specdec::matmul_detail {

namespace {

// Pairs prefetched ahead of the current one: 16 (8.5 KiB). M = 1 into L1 (or L2:
// DecodePrefetch), several rows into L2. Measured on Zen 3 (docs/BENCHMARKS.md section 14: no
// prefetch cost 1.2-1.6x at every M; 16 pairs ahead was best at M = 1), and on a Zen 4 VM
// (section 51), where the former 2-8 pairs ahead into L1 at M = 2-9 left the vpdpbusd build
// waiting on memory: the 1B layers' Q8_0 matmuls from memory took 0.65-0.7x the time at M = 5
// and 9 with 16 pairs into L2 (vpmaddubsw 0.9-0.95x).
constexpr int64_t kPrefetchPairs = 16;

template <_mm_hint kHint = _MM_HINT_T0>
[[gnu::always_inline]] inline void prefetch_pair(const uint8_t* p) {
  #pragma GCC unroll 9
  for (int64_t i = 0; i < kQ8PairBytes; i += 64) _mm_prefetch(reinterpret_cast<const char*>(p + i), kHint);
}

// M = 1 (decode): the same operations as q8_0_block_rows for one row, with the accumulator kept
// in a register across blocks instead of acc[0] in memory (no store-to-load chain per block),
// and no arrays of v / |v| for the compiler to spill. The same bits.
// Prefetch, by DecodePrefetch (cpu.h): 16 pairs (9 KiB) ahead, into L1 under Light (Zen 3,
// BENCHMARKS 14), into L2 under Deep (Intel): on the Intel VM of BENCHMARKS 42 a 1B Q8_0 decode
// took 44.5-45.1 ms so against 58.6-59.5 ms into L1 (and 45.8-46.7 with no prefetch at all,
// where a 3-row verify took 49-52 ms: the L1 prefetches were what made a decode slow there).
template <_mm_hint kHint>
void q8_0_repacked_tile_1row(const uint8_t* tile, int64_t n_blocks, const RowBlock& rb, __m256* acc) {
  const int64_t ahead = kPrefetchPairs * kQ8PairBytes;
  const int8_t* a_row = rb.values(0);
  __m256 acc0 = acc[0];
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* pair = tile + (b / 2) * kQ8PairBytes;
    if (b % 2 == 0) prefetch_pair<kHint>(pair + ahead);
    const uint8_t* values = pair + 32 + (b % 2) * 256;  // (8 vectors of 32 bytes)
    auto v = [&](int k) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(values + 32 * k)); };
    auto v_abs = [&](int k) { const __m256i q = v(k); return _mm256_sign_epi8(q, q); };
    const __m256 d = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(pair + (b % 2) * 16)));
    scale_block(q8_0_block_dot(v_abs, v, a_row + 32 * b), rb.da(0, b), d, acc0);
  }
  acc[0] = acc0;
}

// G activation rows (rb's rows g0 .. g0 + G - 1) over blocks [b_begin, b_end) of a tile, with
// the G accumulators in registers across the blocks. Each of a block's 8 vectors is loaded and
// made |q| once, then applied to the G rows before the next (k outer, rows inner): G int32
// sums, G accumulators, the vector, |q| and two temporaries fit the 16 registers for G <= 5
// (larger groups: see kMaxGroupRows). The row-at-a-time loop (q8_0_block_rows) held v[8] and |q|[8]
// across the rows and reloaded them from the stack for every row: ~70 instructions per row and
// block against ~50 here (docs/BENCHMARKS.md section 38). Per (row, output) the same exact integer sum per block (any order
// gives it) and the same float step in block order, so the same bits.
// ahead: bytes ahead of each pair prefetched (0: none, for a group that re-reads cached pairs),
// into L2 (into_l2: one group over the whole tile) or L1 (the next chunk of several groups).
template <int G>
void q8_0_repacked_group(const uint8_t* tile, int64_t b_begin, int64_t b_end, const RowBlock& rb, int g0,
                         int64_t ahead, bool into_l2, __m256* acc) {
  [[maybe_unused]] const __m256i ones = _mm256_set1_epi16(1);
  const int8_t* a[G];   // (G) the rows' quantized values, (n_pad) each
  const float* da[G];   // (G) the rows' block scales, (n_pad / 32) each
  __m256 sum[G];        // (G) accumulators: 8 outputs each
  #pragma GCC unroll 12
  for (int r = 0; r < G; ++r) {
    a[r] = rb.values(g0 + r);
    da[r] = &rb.acts->scales32[(rb.r0 + g0 + r) * rb.stride32()];
    sum[r] = acc[g0 + r];
  }
  for (int64_t b = b_begin; b < b_end; ++b) {
    const uint8_t* pair = tile + (b / 2) * kQ8PairBytes;
    if (ahead != 0 && b % 2 == 0) {  // past the matrix's end: harmless (never faults)
      if (into_l2) {
        prefetch_pair<_MM_HINT_T1>(pair + ahead);
      } else {
        prefetch_pair<_MM_HINT_T0>(pair + ahead);
      }
    }
    const uint8_t* values = pair + 32 + (b % 2) * 256;  // (8 vectors of 32 bytes)
    __m256i s[G];  // (G) exact integer dot products of this block, 8 lanes each
#if SPECDEC_AVX2_VNNI
    // q + 128 as u8 times a, from -128 sum(a): S with one vpdpbusd per vector and row. Up to 6
    // rows, each sums in two chains (even and odd k): a chain of 8 vpdpbusd waits ~4 cycles per
    // step, and the products issue 2 per cycle, so fewer than ~8 chains leave them idle.
    constexpr bool kTwoChains = G <= 6;
    __m256i odd[kTwoChains ? G : 1];  // (G) the odd k's sums
    #pragma GCC unroll 12
    for (int r = 0; r < G; ++r) {
      s[r] = _mm256_set1_epi32(rb.neg128_sum32(g0 + r, b));
      if constexpr (kTwoChains) odd[r] = _mm256_setzero_si256();
    }
#endif
    #pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(values + 32 * k));
#if SPECDEC_AVX2_VNNI
      const __m256i v_biased = _mm256_xor_si256(v, _mm256_set1_epi8(static_cast<char>(0x80)));
      #pragma GCC unroll 12
      for (int r = 0; r < G; ++r) {
        __m256i& chain = kTwoChains && k % 2 == 1 ? odd[r] : s[r];
        chain = dpbusd(chain, v_biased, bcast4(a[r] + 32 * b + 4 * k));
        __asm__("" : "+x"(chain));  // chains per row, as below
      }
#else
      const __m256i v_abs = _mm256_sign_epi8(v, v);  // |q| as u8 (-128 -> 128)
      #pragma GCC unroll 12
      for (int r = 0; r < G; ++r) {
        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(v_abs, _mm256_sign_epi8(bcast4(a[r] + 32 * b + 4 * k), v)), ones);
        s[r] = k == 0 ? p : _mm256_add_epi32(s[r], p);
        // Keeps each sum a chain of 8 adds in a register: without it GCC re-associated the
        // 8 G products into trees, kept them all live and spilled them (and the accumulators).
        __asm__("" : "+x"(s[r]));
      }
#endif
    }
#if SPECDEC_AVX2_VNNI
    if constexpr (kTwoChains) {
      #pragma GCC unroll 12
      for (int r = 0; r < G; ++r) s[r] = _mm256_add_epi32(s[r], odd[r]);
    }
#endif
    const __m256 d = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(pair + (b % 2) * 16)));
    #pragma GCC unroll 12
    for (int r = 0; r < G; ++r) scale_block(s[r], da[r][b], d, sum[r]);
  }
  #pragma GCC unroll 12
  for (int r = 0; r < G; ++r) acc[g0 + r] = sum[r];
}

// Blocks per chunk when several groups share a tile: 16 blocks (8 pairs, 4.3 KiB) stay in L1
// while every group runs over them. Group after group over the whole tile instead left the
// memory idle while the later groups re-read the tile from L2: the weight stream and the
// products ran one after the other (1B Q8_0 t(9) ~ t(1) + the products).
constexpr int64_t kChunkBlocks = 16;

// Rows per group at most. Paired rounds in one process (docs/BENCHMARKS.md section 41b), one
// thread, a 2048x2048 matrix in L3: R = 6-12 rows as one group took 0.86-0.96x the time of the
// ceil(R / 5) groups of before (6 = 3 + 3, 9 = 4 + 5), R = 13-64 in groups of up to 12
// 0.91-0.95x; from memory (2 threads, 8 matrices of 8192x2048) R = 6 0.82-0.86x, R = 9 0.90x.
// One group of 16 rows took 1.13x two of 8. Groups above 5 spill their accumulators (a load
// and a store per row and block) and still came out cheaper per row.
constexpr int kMaxGroupRows = 12;
// q8_0_repacked_tile's switch has a case per group size up to 12 and the group's row loops
// unroll 12: raise both with the bound.
static_assert(kMaxGroupRows <= 12);

// Several rows: ceil(R / kMaxGroupRows) groups, as even as possible (9 = one group, 17 = 8 + 9,
// 64 = 10 + 10 + 11 + 11 + 11 + 11), so every group has 2 to 12 rows. One group runs over the
// whole tile, prefetching kPrefetchPairs ahead into L2; several take the tile a chunk at a
// time, all groups per chunk, the first prefetching the next chunk (a chunk of all R rows is
// ~R x 0.1 µs of work, above a memory latency from R = 2): into L1 with vpmaddubsw products,
// into L2 with vpdpbusd ones (a 1B Q8_0 prefill of 64-row chunks, 3 alternating rounds on a Zen
// 4 VM: 209-222 tok/s against 181-212 into L1; vpmaddubsw 112-119 against 114-121,
// docs/BENCHMARKS.md 51c2).
void q8_0_repacked_tile(const uint8_t* tile, int64_t n_blocks, const RowBlock& rb, DecodePrefetch decode, __m256* acc) {
  if (rb.R == 1) {
    if (stream_tiles_prefetch_deep(decode)) return q8_0_repacked_tile_1row<_MM_HINT_T1>(tile, n_blocks, rb, acc);
    return q8_0_repacked_tile_1row<_MM_HINT_T0>(tile, n_blocks, rb, acc);
  }
  const int n_groups = (rb.R + kMaxGroupRows - 1) / kMaxGroupRows;
  int sizes[kRowBlock];  // (n_groups) rows per group: 2..kMaxGroupRows
  for (int g = 0, g0 = 0; g < n_groups; ++g) {
    sizes[g] = (rb.R - g0) / (n_groups - g);  // the remaining rows over the remaining groups
    g0 += sizes[g];
  }
  const bool one_group = n_groups == 1;
  const bool into_l2 = one_group || SPECDEC_AVX2_VNNI;
  const int64_t chunk = one_group ? n_blocks : kChunkBlocks;
  for (int64_t c0 = 0; c0 < n_blocks; c0 += chunk) {
    const int64_t c1 = c0 + chunk < n_blocks ? c0 + chunk : n_blocks;
    for (int g = 0, g0 = 0; g < n_groups; g0 += sizes[g], ++g) {
      const int64_t ahead = one_group ? kPrefetchPairs * kQ8PairBytes : g == 0 ? chunk / 2 * kQ8PairBytes : 0;
      switch (sizes[g]) {
        case 2: q8_0_repacked_group<2>(tile, c0, c1, rb, g0, ahead, into_l2, acc); break;
        case 3: q8_0_repacked_group<3>(tile, c0, c1, rb, g0, ahead, into_l2, acc); break;
        case 4: q8_0_repacked_group<4>(tile, c0, c1, rb, g0, ahead, into_l2, acc); break;
        case 5: q8_0_repacked_group<5>(tile, c0, c1, rb, g0, ahead, into_l2, acc); break;
        case 6: q8_0_repacked_group<6>(tile, c0, c1, rb, g0, ahead, into_l2, acc); break;
        case 7: q8_0_repacked_group<7>(tile, c0, c1, rb, g0, ahead, into_l2, acc); break;
        case 8: q8_0_repacked_group<8>(tile, c0, c1, rb, g0, ahead, into_l2, acc); break;
        case 9: q8_0_repacked_group<9>(tile, c0, c1, rb, g0, ahead, into_l2, acc); break;
        case 10: q8_0_repacked_group<10>(tile, c0, c1, rb, g0, ahead, into_l2, acc); break;
        case 11: q8_0_repacked_group<11>(tile, c0, c1, rb, g0, ahead, into_l2, acc); break;
        default: q8_0_repacked_group<12>(tile, c0, c1, rb, g0, ahead, into_l2, acc); break;
      }
    }
  }
}

}  // namespace

void SPECDEC_AVX2_KERNEL(matmul_range_repacked_avx2)(const RangeJob& job) {
  const int64_t n_blocks = job.w->n_in / 32;
  const DecodePrefetch decode = job.decode_prefetch;
  for_each_repacked_tile(job, q8_tile_bytes(job.w->n_in), [n_blocks, decode](const uint8_t* tile, const RowBlock& rb, __m256* acc) {
    q8_0_repacked_tile(tile, n_blocks, rb, decode, acc);
  });
}

}  // namespace specdec::matmul_detail
