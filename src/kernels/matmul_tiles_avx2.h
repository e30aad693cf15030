// kernels/matmul_tiles_avx2.h — the weight side of the AVX2 integer tiles (matmul_tiles_avx2.cpp):
// the in-place 8-row Tile over the file's rows, the ChunkTile over a Chunks16Tiles8 matrix, and
// their accessors, which return a block's bytes transposed (vector k's lane L = bytes 4k..4k+3
// of row L). Include only from translation units compiled with the AVX2 flags: everything here
// has internal linkage.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/matmul_avx2_rows.h"
#include "kernels/matmul_internal.h"

namespace specdec::matmul_detail {
namespace {

// Weight rows of one tile: row L at base + offset[L] (rows past the end repeat the last one).
struct Tile {
  const uint8_t* rows[kLanes];
  __m256i offset;  // (8) int32 byte offsets of the rows from rows[0], for gathers
  // The next tile's bytes (the 8 rows after this one, contiguous) are prefetched in order,
  // spread over this tile's block iterations: a tile reads 8 interleaved streams, which the
  // hardware prefetchers follow poorly. Prefetches past the matrix are harmless.
  const uint8_t* next = nullptr;
  int64_t step_bytes = 0;  // bytes of the next tile prefetched per block iteration
};

// Into L1 at every M (kIntoL1 is for the ChunkTile overload's callers: these tiles' callers
// pass a RowBlock for every M, so RB::kPrefetchIntoL1 does not say whether M = 1).
template <bool kIntoL1>
[[gnu::always_inline]] inline void prefetch_next(const Tile& t, int64_t step) {
  const char* p = reinterpret_cast<const char*>(t.next + step * t.step_bytes);
  for (int64_t i = 0; i < t.step_bytes; i += 64) _mm_prefetch(p + i, _MM_HINT_T0);
}

// Bytes of the next tile prefetched per block iteration: computed once per call (a division).
inline int64_t tile_step_bytes(const WeightMatrix& w, int64_t n_steps) {
  const int64_t lines = (kLanes * static_cast<int64_t>(w.row_bytes) + 63) / 64;
  return 64 * ((lines + n_steps - 1) / n_steps);
}

Tile make_tile(const WeightMatrix& w, int64_t o0, int n_valid, int64_t step_bytes) {
  Tile t;
  const int64_t row_bytes = static_cast<int64_t>(w.row_bytes);
  t.next = static_cast<const uint8_t*>(w.data) + (o0 + kLanes) * row_bytes;
  t.step_bytes = step_bytes;
  const uint8_t* base = static_cast<const uint8_t*>(w.data) + o0 * row_bytes;
  alignas(32) int32_t off[kLanes];
  #pragma GCC unroll 8
  for (int L = 0; L < kLanes; ++L) {
    const int64_t o = min_int(L, n_valid - 1);
    t.rows[L] = base + o * row_bytes;
    off[L] = static_cast<int32_t>(o * row_bytes);  // < 8 rows: fits (rows are far below 256 MiB)
  }
  t.offset = _mm256_load_si256(reinterpret_cast<const __m256i*>(off));
  return t;
}

// The 16 bytes at offset `off` of every row, transposed: y[k] lane L = bytes 4k..4k+3 of row L.
inline void load_transposed16(const Tile& t, int64_t off, __m256i* y) {
  __m256i x[4];
  #pragma GCC unroll 4
  for (int g = 0; g < 4; ++g)
    x[g] = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t.rows[g] + off))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(t.rows[4 + g] + off)), 1);
  const __m256i t0 = _mm256_unpacklo_epi32(x[0], x[1]), t1 = _mm256_unpackhi_epi32(x[0], x[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(x[2], x[3]), t3 = _mm256_unpackhi_epi32(x[2], x[3]);
  y[0] = _mm256_unpacklo_epi64(t0, t2);
  y[1] = _mm256_unpackhi_epi64(t0, t2);
  y[2] = _mm256_unpacklo_epi64(t1, t3);
  y[3] = _mm256_unpackhi_epi64(t1, t3);
}

// The 32 bytes at offset `off` of every row, transposed: y[k] lane L = bytes 4k..4k+3 of row L.
inline void load_transposed32(const Tile& t, int64_t off, __m256i* y) {
  load_transposed16(t, off, y);
  load_transposed16(t, off + 16, y + 4);
}

// 8 binary16 values, one per lane, from the low (shift 0) or high (shift 16) half of each dword.
inline __m256 half_lanes(__m256i h, int shift) {
  h = shift == 0 ? _mm256_and_si256(h, _mm256_set1_epi32(0xFFFF)) : _mm256_srli_epi32(h, 16);
  // 128-bit lane l: halves of lanes 4l..4l+3 twice -> qwords 0 and 2 hold lanes 0..7 in order
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(h, h), 0x08);
  return _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
}

// The binary16 value in the low (shift 0) or high (shift 16) half of the dword at rows[L] + off.
inline __m256 gather_half(const Tile& t, int64_t off, int shift) {
  return half_lanes(_mm256_i32gather_epi32(reinterpret_cast<const int*>(t.rows[0] + off), t.offset, 1), shift);
}

// ---- A Chunks16Tiles8 tile (matmul_internal.h): the transposed 16-byte chunks are stored, so
// each load_transposed16 is 4 aligned loads. kBlock: the super-block's bytes in the file. Read
// through its super-block views (super_block below).
template <int64_t kBlock>
struct ChunkTile {
  static constexpr int64_t kStride = chunk16_block_bytes(kBlock);  // bytes per super-block
  static constexpr int64_t kChunks = kBlock / 16;
  const uint8_t* base = nullptr;   // the tile's first super-block
  int64_t prefetch_ahead = 0;      // bytes ahead of the current super-block prefetched
};

// Into L1 for one activation row, L2 for more (kIntoL1 = RB::kPrefetchIntoL1: RowBlock in
// matmul_internal.h).
template <bool kIntoL1, int64_t kBlock>
[[gnu::always_inline]] inline void prefetch_next(const ChunkTile<kBlock>& t, int64_t s) {
  const char* p = reinterpret_cast<const char*>(t.base + s * ChunkTile<kBlock>::kStride + t.prefetch_ahead);
  for (int64_t i = 0; i < ChunkTile<kBlock>::kStride; i += 64) _mm_prefetch(p + i, kIntoL1 ? _MM_HINT_T0 : _MM_HINT_T1);
}

// Byte g % 4 of packed[g / 4] in every lane, as an int32 (per-row bytes such as sub-block
// scales, transposed 4 per lane).
inline __m256i lane_byte(const __m256i* packed, int g) {
  return _mm256_and_si256(_mm256_srli_epi32(packed[g / 4], 8 * (g % 4)), _mm256_set1_epi32(0xFF));
}

// Super-block s of a tile, for the K-quant tiles, which read it at offsets within the
// super-block (compile-time constants once unrolled). In place: the file's offsets, s * B + off.
// ChunkTile: the super-block's address once; each access then folds to a constant offset from
// it (file-offset accessors paid two divisions by B per access: BENCHMARKS 29).
template <typename TileT>
struct SuperBlock {
  const TileT& t;
  int64_t sb;  // s * B: the super-block's file offset
};
template <int64_t kBlock>
struct ChunkSuperBlock {
  const uint8_t* p;  // the tile's super-block s: ChunkTile<kBlock>::kStride bytes
};
inline SuperBlock<Tile> super_block(const Tile& t, int64_t s, int64_t block_bytes) { return {t, s * block_bytes}; }
template <int64_t kBlock>
inline ChunkSuperBlock<kBlock> super_block(const ChunkTile<kBlock>& t, int64_t s, int64_t /*block_bytes*/) {
  return {t.base + s * ChunkTile<kBlock>::kStride};
}
inline void load_transposed16(const SuperBlock<Tile>& u, int64_t off, __m256i* y) { load_transposed16(u.t, u.sb + off, y); }
inline void load_transposed32(const SuperBlock<Tile>& u, int64_t off, __m256i* y) { load_transposed32(u.t, u.sb + off, y); }
inline __m256 gather_half(const SuperBlock<Tile>& u, int64_t off, int shift) { return gather_half(u.t, u.sb + off, shift); }
// off: a multiple of 16 below 16 * kChunks.
template <int64_t kBlock>
inline void load_transposed16(const ChunkSuperBlock<kBlock>& u, int64_t off, __m256i* y) {
  #pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) y[k] = _mm256_load_si256(reinterpret_cast<const __m256i*>(u.p + 128 * (off / 16) + 32 * k));
}
template <int64_t kBlock>
inline void load_transposed32(const ChunkSuperBlock<kBlock>& u, int64_t off, __m256i* y) {
  load_transposed16(u, off, y);
  load_transposed16(u, off + 16, y + 4);
}
// The binary16 value at byte off + shift / 8 of every row, which must lie in the tail.
template <int64_t kBlock>
inline __m256 gather_half(const ChunkSuperBlock<kBlock>& u, int64_t off, int shift) {
  constexpr int64_t kChunks = ChunkTile<kBlock>::kChunks;
  const uint8_t* p = u.p + 128 * kChunks + 16 * ((off + shift / 8 - 16 * kChunks) / 2);
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
}

// The 8 little-endian dwords at byte off of every row (in place: a gather; a ChunkTile: two of
// the tail's 2-byte units, so off must lie in the tail, off - 16 kChunks even).
inline __m256i gather_dword(const SuperBlock<Tile>& u, int64_t off) {
  return _mm256_i32gather_epi32(reinterpret_cast<const int*>(u.t.rows[0] + u.sb + off), u.t.offset, 1);
}
template <int64_t kBlock>
inline __m256i gather_dword(const ChunkSuperBlock<kBlock>& u, int64_t off) {
  constexpr int64_t kChunks = ChunkTile<kBlock>::kChunks;
  const uint8_t* p = u.p + 128 * kChunks + 16 * ((off - 16 * kChunks) / 2);
  const __m256i lo = _mm256_cvtepu16_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i hi = _mm256_cvtepu16_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p + 16)));
  return _mm256_or_si256(lo, _mm256_slli_epi32(hi, 16));
}

}  // namespace
}  // namespace specdec::matmul_detail
