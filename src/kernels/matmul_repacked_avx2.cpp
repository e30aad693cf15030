// AVX2 matmul over a Q8_0 matrix repacked into the Q8_0Tiles8 layout (matmul_internal.h,
// written by repack_rows). Compiled with the AVX2 flags; reached only through matmul_range_avx2.
//
// The in-place Q8_0 tile (matmul_tiles_avx2.cpp) builds, for each block of 32 values of 8 rows,
// the 8 transposed vectors v[k] (8 loads, 8 inserts, 16 unpacks) and gathers the 8 scales.
// Here those vectors are stored as they are needed: per block, 8 aligned 32-byte loads and one
// 16-byte load of the scales. The per-row work (q8_0_block_rows) is the same instruction
// sequence, so every output is bit for bit the in-place tile's, for every M, tile and thread.
// A thread's range is one sequential stream (tiles are contiguous), which the hardware
// prefetchers follow; pairs further ahead are also prefetched explicitly.
#include <immintrin.h>

#include "kernels/matmul_avx2_rows.h"
#include "kernels/matmul_internal.h"

namespace specdec::matmul_detail {

namespace {

// Pairs prefetched ahead of the current one: about one memory latency of work, which shrinks
// as each pair feeds more activation rows (measured on Zen 3, docs/BENCHMARKS.md section 14:
// no prefetch cost 1.2-1.6x at every M; 16 pairs ahead was best at M = 1, 2-8 at M = 5-9).
inline int64_t prefetch_pairs(int n_rows) { return n_rows >= 8 ? 2 : (16 + n_rows - 1) / n_rows; }

inline void prefetch_pair(const uint8_t* p) {
  #pragma GCC unroll 9
  for (int64_t i = 0; i < kQ8PairBytes; i += 64) _mm_prefetch(reinterpret_cast<const char*>(p + i), _MM_HINT_T0);
}

// M = 1 (decode): the same operations as q8_0_block_rows for one row, with the accumulator kept
// in a register across blocks instead of acc[0] in memory (no store-to-load chain per block),
// and no arrays of v / |v| for the compiler to spill. The same bits.
void q8_0_repacked_tile_1row(const uint8_t* tile, int64_t n_blocks, const RowBlock& rb, __m256* acc) {
  const int64_t ahead = prefetch_pairs(1) * kQ8PairBytes;
  const int8_t* a_row = rb.values(0);
  __m256 acc0 = acc[0];
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* pair = tile + (b / 2) * kQ8PairBytes;
    if (b % 2 == 0) prefetch_pair(pair + ahead);
    const uint8_t* values = pair + 32 + (b % 2) * 256;  // (8 vectors of 32 bytes)
    auto v = [&](int k) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(values + 32 * k)); };
    auto v_abs = [&](int k) { const __m256i q = v(k); return _mm256_sign_epi8(q, q); };
    const __m256 d = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(pair + (b % 2) * 16)));
    scale_block(q8_0_block_dot(v_abs, v, a_row + 32 * b), rb.da(0, b), d, acc0);
  }
  acc[0] = acc0;
}

void q8_0_repacked_tile(const uint8_t* tile, int64_t n_blocks, const RowBlock& rb, __m256* acc) {
  if (rb.R == 1) return q8_0_repacked_tile_1row(tile, n_blocks, rb, acc);
  const int64_t ahead = prefetch_pairs(rb.R) * kQ8PairBytes;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* pair = tile + (b / 2) * kQ8PairBytes;
    if (b % 2 == 0) prefetch_pair(pair + ahead);  // past the matrix's end: harmless (never faults)
    const uint8_t* values = pair + 32 + (b % 2) * 256;  // (8 vectors of 32 bytes)
    __m256i v[8], v_abs[8];
    #pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      v[k] = _mm256_load_si256(reinterpret_cast<const __m256i*>(values + 32 * k));
      v_abs[k] = _mm256_sign_epi8(v[k], v[k]);  // |q| as u8 (-128 -> 128)
    }
    const __m256 d = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(pair + (b % 2) * 16)));
    q8_0_block_rows(v, v_abs, d, rb, b, acc);
  }
}

}  // namespace

void matmul_range_repacked_avx2(const RangeJob& job) {
  const WeightMatrix& w = *job.w;
  const int64_t tile_bytes = q8_tile_bytes(w.n_in), n_blocks = w.n_in / 32;
  __m256 acc[kRowBlock];  // (kRowBlock) one accumulator per activation row: 8 outputs
  for (int64_t o0 = job.o_begin; o0 < job.o_end; o0 += kLanes) {
    const int n_valid = static_cast<int>(job.o_end - o0 < kLanes ? job.o_end - o0 : kLanes);
    const uint8_t* tile = static_cast<const uint8_t*>(w.data) + (o0 / kLanes) * tile_bytes;
    for (int r0 = 0; r0 < job.M; r0 += kRowBlock) {
      const RowBlock rb{&job.acts, r0, min_int(kRowBlock, job.M - r0)};
      for (int r = 0; r < rb.R; ++r) acc[r] = _mm256_setzero_ps();
      q8_0_repacked_tile(tile, n_blocks, rb, acc);
      store_outputs(acc, rb, job.y, w.n_out, o0, n_valid);
    }
  }
}

}  // namespace specdec::matmul_detail
