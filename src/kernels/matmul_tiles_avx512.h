// kernels/matmul_tiles_avx512.h — what the AVX-512 tile files share (matmul_tiles_avx512.cpp:
// Q8_0, Q4_K, Q5_K, Q6_K and the repacked layouts; matmul_tiles_small_avx512.cpp: the legacy
// 32-value types, Q2_K and Q3_K): the 16-row Tile over the file's rows and its accessors, the
// Tile16 over the repacked Tiles16 layouts, the VNNI dot products and the tile loops (the
// K-quant block decoders: matmul_kquant_blocks_avx512.h). Include
// only from translation units compiled with the AVX-512 flags: everything here has internal
// linkage, so no copy built with wide-ISA flags can serve another file.
//
// Layout: a tile is 16 weight rows, one per vector lane. For each block of 32 weight values the
// 16 rows' bytes are transposed in registers into 8 vectors v[k] whose lane L holds values
// 4k..4k+3 of row L; each activation row then needs, per block, 8 vpdpbusd with its 4 values
// broadcast: lane L accumulates exactly the integer dot product of row L's block.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/matmul_internal.h"
#include "kernels/quant_blocks.h"

namespace specdec::matmul_detail {

// The legacy types, Q2_K and Q3_K read in place (matmul_tiles_small_avx512.cpp); false for
// other types. Called by matmul_range_tiled_avx512.
bool matmul_range_tiled_small_avx512(const RangeJob& job);

namespace {

constexpr int kLanes = 16;  // weight rows per tile

inline int min_int(int a, int b) { return a < b ? a : b; }

// Weight rows of one tile: row L of the tile at rows[L] (rows past the end repeat the last one).
struct Tile {
  const uint8_t* rows[kLanes];
  // The next tile's bytes (the 16 rows after this one, contiguous) are prefetched in order,
  // spread over this tile's n_steps block iterations: a tile reads 16 interleaved streams,
  // which the hardware prefetchers follow poorly. Prefetches past the matrix are harmless.
  const uint8_t* next = nullptr;
  int64_t step_bytes = 0;  // bytes of the next tile prefetched per block iteration
};

// Prefetches the part of the next tile that belongs to block iteration `step`, into L2 at
// every M (kIntoL1 is for the Tile16 overload's callers).
template <bool kIntoL1>
[[gnu::always_inline]] inline void prefetch_next(const Tile& t, int64_t step) {
  const char* p = reinterpret_cast<const char*>(t.next + step * t.step_bytes);
  for (int64_t i = 0; i < t.step_bytes; i += 64) _mm_prefetch(p + i, _MM_HINT_T2);
}

// Bytes of the next tile prefetched per block iteration: computed once per call (a division).
inline int64_t tile_step_bytes(const WeightMatrix& w, int64_t n_steps) {
  const int64_t lines = (kLanes * static_cast<int64_t>(w.row_bytes) + 63) / 64;
  return 64 * ((lines + n_steps - 1) / n_steps);
}

Tile make_tile(const WeightMatrix& w, int64_t o0, int n_valid, int64_t step_bytes) {
  Tile t;
  t.next = static_cast<const uint8_t*>(w.data) + (o0 + kLanes) * static_cast<int64_t>(w.row_bytes);
  t.step_bytes = step_bytes;
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
  #pragma GCC unroll 16
  for (int L = 0; L < kLanes; ++L) {
    const int64_t o = o0 + min_int(L, n_valid - 1);
    t.rows[L] = base + o * static_cast<int64_t>(w.row_bytes);
  }
  return t;
}

// Lane l (128-bit) of the result holds the 16 bytes at rows[4l + g] + off.
inline __m512i load_column(const Tile& t, int g, int64_t off) {
  __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t.rows[g] + off)));
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(t.rows[4 + g] + off)), 1);
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(t.rows[8 + g] + off)), 2);
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(t.rows[12 + g] + off)), 3);
  return v;
}

// The 16 bytes at offset `off` of every row, transposed: y[k] lane L = bytes 4k..4k+3 of row L.
inline void load_transposed16(const Tile& t, int64_t off, __m512i* y) {
  const __m512i x0 = load_column(t, 0, off), x1 = load_column(t, 1, off);
  const __m512i x2 = load_column(t, 2, off), x3 = load_column(t, 3, off);
  const __m512i t0 = _mm512_unpacklo_epi32(x0, x1), t1 = _mm512_unpackhi_epi32(x0, x1);
  const __m512i t2 = _mm512_unpacklo_epi32(x2, x3), t3 = _mm512_unpackhi_epi32(x2, x3);
  y[0] = _mm512_unpacklo_epi64(t0, t2);
  y[1] = _mm512_unpackhi_epi64(t0, t2);
  y[2] = _mm512_unpacklo_epi64(t1, t3);
  y[3] = _mm512_unpackhi_epi64(t1, t3);
}

// 16 binary16 values, one per row, from the low (shift 0) or high (shift 16) half of the
// dword at rows[L] + off.
inline __m512 gather_half(const Tile& t, int64_t off, int shift) {
  alignas(32) uint16_t h[kLanes];
  #pragma GCC unroll 16
  for (int L = 0; L < kLanes; ++L) std::memcpy(&h[L], t.rows[L] + off + shift / 8, 2);
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h)));
}

// The 16 little-endian dwords at rows[L] + off, one per lane.
inline __m512i gather_dword(const Tile& t, int64_t off) {
  alignas(64) uint32_t w[kLanes];
  #pragma GCC unroll 16
  for (int L = 0; L < kLanes; ++L) std::memcpy(&w[L], t.rows[L] + off, 4);
  return _mm512_load_si512(w);
}

// ---- The same accessors over the Tiles16 layouts (matmul_internal.h), which store the
// transposed vectors of 16-row tiles: each is one aligned 64-byte load, each set of 16
// binary16 values one 32-byte load (instead of four 16-byte loads, three inserts and two
// unpack stages, and 16 scalar loads). The Q8Tile16 accessors take the file's offsets
// (b * 34 + ...), as the in-place Tile's (the AMX tiles' use); q8_0_block reads a block by
// index, and a ChunkTile16 is read through its super-block views (super_block below). x below is
// the Tiles8 form's offset in a unit, whose 16-row data lies at 2 x in the unit's 2 U bytes.
//
// load64 reads every weight vector of the Tiles16 layouts, and keeps those loads in program
// order: a volatile asm, which GCC does not move past another. A tile reads one sequential
// stream, and GCC's scheduler had hoisted one vector of each group of eight several hundred
// bytes ahead of the rest (the Q4_K decode loop loaded offset 0x680 before 0x500-0x640). On
// Zen 4 that costs the hardware prefetchers their stream: a 1B Q4_K_M decode read 0.70-0.74 of
// the probe in the fast memory regime with the hoisted loads and 0.74-0.82 in order, and a Q8_0
// step that loaded each block's last vector first 0.52 against 0.84 (BENCHMARKS 54a). In cache
// the order does not matter; the values, and so the bits, are the same.
inline __m512i load64(const uint8_t* p) {
  __m512i v;
  __asm__ volatile("vmovdqa64 %1, %0" : "=v"(v) : "m"(*reinterpret_cast<const __m512i*>(p)));
  return v;
}
inline __m512 halves16(const uint8_t* p) {  // 16 binary16 at p
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
}

// A verify's prefetch distance into L2 (kTile16PrefetchBytes below says why).
constexpr int64_t kTile16RowsPrefetchBytes = 8192;

// A 16-row tile of a Tiles16 matrix at p (rows past n_out are zero). Its block iteration
// `step` reads bytes [step * step_bytes, (step + 1) * step_bytes) of the tile: one sequential
// stream, as the tiles of a task follow each other. one_row_*: a decode's prefetch
// (set_one_row_prefetch below); rows_*: a verify's (set_rows_prefetch).
struct Tile16 {
  const uint8_t* p = nullptr;
  int64_t step_bytes = 0;
  int64_t one_row_ahead = 0;     // bytes ahead of the block being read; 0: no prefetch
  bool one_row_into_l1 = false;  // prefetcht0, else prefetcht1
  bool one_row_burst = false;    // a K-quant super-block's lines at once, not spread (Burst)
  int64_t rows_ahead = kTile16RowsPrefetchBytes;
  bool rows_into_l1 = false;
  static constexpr bool kKQuant = false;  // a K-quant tile (ChunkTile16, Q6KTile16)
  // A decode under Light prefetches nothing (set_one_row_prefetch): Q8_0 and all K-quants but Q5_K.
  static constexpr bool kLightDecodeNone = false;
};
struct Q8Tile16 : Tile16 {  // Q8_0Tiles16: units of 2 kQ8PairBytes (two blocks)
  static constexpr bool kLightDecodeNone = true;
};

// Bytes of a Tiles16 stream prefetched ahead of the block being read.
// A decode (one activation row), by DecodePrefetch (cpu.h):
//   Light: kTile16PrefetchBytes into L1 (the legacy types; Q8_0 and the K-quants: none, see
//     set_one_row_prefetch). The hardware prefetchers alone left
//     a 2-thread M = 1 call from memory at 36-52 GB/s; prefetching the next tile spread over
//     this one's iterations (a second stream, _MM_HINT_T2) at 38-52; this at 48-58 (BENCHMARKS
//     27b). 2 KiB was slower for Q4_K, 8 KiB the same. The K-quant tiles had it too, spread over
//     a super-block's blocks, until BENCHMARKS 47 found a verify's prefetch better on Zen 4
//     (set_one_row_prefetch). Q8_0 prefetches nothing (BENCHMARKS 34a, Zen 4: the hardware
//     prefetchers follow its one sequential stream, at its low compute per byte, best).
//   Deep (and Q8_0 under Burst): as several rows' tiles below. On the Emerald Rapids VM of BENCHMARKS 36
//     a 1B Q8_0 decode read 0.91-0.99 of the (plain) probe so, 0.88-0.91 at 16 KiB into L2,
//     0.89-0.94 with Light's 4 KiB into L1 and 0.77-0.83 with Light's none; Q4_K_M 0.86-0.92
//     (0.89-0.91 at 16 KiB, 0.81-0.89 at 4 KiB) against Light's 0.72-0.82.
// Several activation rows: kTile16RowsPrefetchBytes ahead, into L2 (RowBlock::kPrefetchIntoL1);
// a 5-row Q8_0 verify of the 1B shape took 0.89x the time it took at 4 KiB, a 9-row one 0.95x
// (BENCHMARKS 34b), the K-quants' the same.
constexpr int64_t kTile16PrefetchBytes = 4096;
// VerifyPrefetch::Near (cpu.h): a K-quant tile's verify prefetch, into L1. The 16 rows of a
// Q4_K super-block are 2304 bytes, so this reaches the rest of the current one and the start
// of the next. Measured on the Intel VM of BENCHMARKS 42 (8192x2048 Q4_K from memory, 2
// threads, paired against Far): 512 bytes 0.81-0.88x, 768 0.82-0.85x, 1024 0.84-0.88x, 1536
// 0.88x, 2048 0.97x, 4096 1.02x, 8192 1.04-1.06x; with Far's L2 prefetch as well, 1.02-1.03x.
constexpr int64_t kTile16NearPrefetchBytes = 768;

// A decode's tile: the distance and hint above for `decode`. Under Light the Q8_0 and K-quant
// tiles (Chunks16Tiles16, Q6KTiles16), one sequential stream per tile, prefetch nothing
// (kLightDecodeNone): the hardware prefetchers follow them. On the Zen 4 VM of BENCHMARKS 49d
// a 1B Q4_K_M decode so read 23.4 GB/s on one thread against 18.6-18.9 with a verify's
// prefetch (each super-block's lines in one burst, 8 KiB ahead into L2, section 47's choice
// over 4 KiB into L1), and on two threads 40.3-41.2 GB/s against 32.1-33.3 with a fast memory,
// 31.6-32.2 against 28.7 with a slow one; a 2-row forward no longer outran a decode. Q5_K is
// the exception (as_verify): without the verify's prefetch a 1B Q5_K_M decode read 19.5-21
// GB/s against 26-34.
template <typename TileT>
inline void set_one_row_prefetch(TileT& t, DecodePrefetch decode) {
  constexpr bool kQ8 = std::is_same_v<TileT, Q8Tile16>;
  const bool light = decode == DecodePrefetch::Light;
  const bool none = light && TileT::kLightDecodeNone;
  const bool as_verify = light && TileT::kKQuant && !TileT::kLightDecodeNone;  // Q5_K
  const bool deep = as_verify || (kQ8 ? stream_tiles_prefetch_deep(decode) : decode == DecodePrefetch::Deep);
  t.one_row_ahead = none ? 0 : deep ? kTile16RowsPrefetchBytes : kTile16PrefetchBytes;
  t.one_row_into_l1 = !deep;
  t.one_row_burst = as_verify || decode == DecodePrefetch::Burst;
}

// A verify's tile (several activation rows): Far's distance into L2, or, for a K-quant tile
// (kKQuant) under VerifyPrefetch::Near, Near's into L1.
template <bool kKQuant>
inline void set_rows_prefetch(Tile16& t, VerifyPrefetch verify) {
  const bool near = kKQuant && verify == VerifyPrefetch::Near;
  t.rows_ahead = near ? kTile16NearPrefetchBytes : kTile16RowsPrefetchBytes;
  t.rows_into_l1 = near;
}

// Prefetches part `part` of n_parts of the lines that start in the bytes step + ahead will read
// (all of them for n_parts = 1): each line once, past the tile into the next (contiguous) one;
// past the matrix: harmless. ahead = 0: none. Into L1 (into_l1) or L2.
// always_inline: GCC 12 counts a prefetch as no side effect, so a call left out of line is to a
// "const" function, and its result unused, the call is deleted (every prefetch vanished so).
[[gnu::always_inline]] inline void prefetch_tile16_lines(const Tile16& t, int64_t step, int64_t ahead, bool into_l1, int part,
                                                         int n_parts) {
  if (ahead == 0) return;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(t.p + step * t.step_bytes + ahead);
  const uintptr_t first_line = (begin + 63) & ~uintptr_t{63};
  const int64_t n_lines = static_cast<int64_t>(begin + static_cast<uintptr_t>(t.step_bytes) - first_line + 63) / 64;
  const int64_t lo = n_lines * part / n_parts, hi = n_lines * (part + 1) / n_parts;
  if (into_l1) {
    for (int64_t i = lo; i < hi; ++i) _mm_prefetch(reinterpret_cast<const char*>(first_line + 64 * static_cast<uintptr_t>(i)), _MM_HINT_T0);
  } else {
    for (int64_t i = lo; i < hi; ++i) _mm_prefetch(reinterpret_cast<const char*>(first_line + 64 * static_cast<uintptr_t>(i)), _MM_HINT_T1);
  }
}
// The tiles' prefetch of step's lines ahead, part `part` of kParts. kOneRow =
// RB::kPrefetchIntoL1 of the caller's row block (RowBlock in matmul_internal.h), true for a
// decode's OneRowBlock: then the tile's one_row_* fields choose, else a verify's distance. The
// K-quant tiles at M = 1 (RB::kOneRow) spread a super-block's lines (16 rows x 144-210 bytes:
// 36-53) over its 8 blocks of 32 values under Deep (on Zen 4 in BENCHMARKS 31 a Q4_K M = 1 call
// from memory took 0.85x as long so as with a burst; since 49d Zen 4's Light prefetches none),
// or in one burst at part 0 under DecodePrefetch::Burst (Zen 5, BENCHMARKS 43).
template <bool kOneRow, int kParts>
[[gnu::always_inline]] inline void prefetch_next_part(const Tile16& t, int64_t step, int part) {
  if constexpr (kOneRow) {
    if (kParts > 1 && t.one_row_burst) {
      if (part == 0) prefetch_tile16_lines(t, step, t.one_row_ahead, t.one_row_into_l1, 0, 1);
    } else {
      prefetch_tile16_lines(t, step, t.one_row_ahead, t.one_row_into_l1, part, kParts);
    }
  } else {
    prefetch_tile16_lines(t, step, t.rows_ahead, t.rows_into_l1, part, kParts);
  }
}
template <bool kOneRow>
[[gnu::always_inline]] inline void prefetch_next(const Tile16& t, int64_t step) {
  prefetch_next_part<kOneRow, 1>(t, step, 0);
}
// The in-place Tile keeps one burst per step (its next-tile stream goes to L2 at every M).
template <bool kIntoL1, int kParts>
[[gnu::always_inline]] inline void prefetch_next_part(const Tile& t, int64_t step, int part) {
  if (part == 0) prefetch_next<kIntoL1>(t, step);
}

// off = b * 34 + 2 + 16 h: vectors 4h..4h+3 of block b.
inline void load_transposed16(const Q8Tile16& t, int64_t off, __m512i* y) {
  const int64_t b = off / 34, h = (off - 34 * b - 2) / 16;
  const uint8_t* unit = t.p + (b / 2) * (2 * kQ8PairBytes);
  const int64_t x = 32 + (b % 2) * 256 + 128 * h;
  #pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) y[k] = load64(unit + 2 * (x + 32 * k));
}

// off = b * 34, shift 0: block b's 16 scales.
inline __m512 gather_half(const Q8Tile16& t, int64_t off, int /*shift*/) {
  const int64_t b = off / 34;
  return halves16(t.p + (b / 2) * (2 * kQ8PairBytes) + 2 * ((b % 2) * 16));
}

// A Chunks16Tiles16 matrix (Q4_K, Q5_K; Q2_K, Q3_K) with kBlock-byte super-blocks: units of
// 2 kStride.
template <int64_t kBlock>
struct ChunkTile16 : Tile16 {
  static constexpr bool kKQuant = true;
  static constexpr bool kLightDecodeNone = kBlock != sizeof(quant::BlockQ5_K);  // BENCHMARKS 49d
  static constexpr int64_t kStride = chunk16_block_bytes(kBlock);  // bytes per 8-row super-block
  static constexpr int64_t kChunks = kBlock / 16;
};

// The 32 bytes at offset `off` of every row of any tile above, transposed: y[k] lane L = bytes
// 4k..4k+3 of row L (two load_transposed16).
template <typename TileT>
inline void load_transposed32(const TileT& t, int64_t off, __m512i* y) {
  load_transposed16(t, off, y);
  load_transposed16(t, off + 16, y + 4);
}

// Super-block s of a tile, for the K-quant decoders below, which read it at offsets within the
// super-block (compile-time constants once unrolled). In place: the file's offsets, s * B + off.
// ChunkTile16: the unit's address once per super-block; each access then folds to a constant
// offset from it (file-offset accessors paid two divisions by B per access: ~70 scalar
// instructions per super-block that share ports 0 and 5 with the vector work on Intel cores;
// BENCHMARKS 29).
template <typename TileT>
struct SuperBlock {
  const TileT& t;
  int64_t sb;  // s * B: the super-block's file offset
};
template <int64_t kBlock>
struct ChunkSuperBlock {
  const uint8_t* unit;  // the 16-row unit of super-block s: 2 kStride bytes
};
template <typename TileT>
inline SuperBlock<TileT> super_block(const TileT& t, int64_t s, int64_t block_bytes) {
  return {t, s * block_bytes};
}
template <int64_t kBlock>
inline ChunkSuperBlock<kBlock> super_block(const ChunkTile16<kBlock>& t, int64_t s, int64_t /*block_bytes*/) {
  return {t.p + s * (2 * ChunkTile16<kBlock>::kStride)};
}
template <typename TileT>
inline void load_transposed16(const SuperBlock<TileT>& u, int64_t off, __m512i* y) { load_transposed16(u.t, u.sb + off, y); }
template <typename TileT>
inline __m512 gather_half(const SuperBlock<TileT>& u, int64_t off, int shift) { return gather_half(u.t, u.sb + off, shift); }
// off: a multiple of 16 below 16 * kChunks.
template <int64_t kBlock>
inline void load_transposed16(const ChunkSuperBlock<kBlock>& u, int64_t off, __m512i* y) {
  #pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) y[k] = load64(u.unit + 2 * (128 * (off / 16) + 32 * k));
}
// The binary16 value at byte off + shift / 8 of every row, which must lie in the tail.
template <int64_t kBlock>
inline __m512 gather_half(const ChunkSuperBlock<kBlock>& u, int64_t off, int shift) {
  constexpr int64_t kChunks = ChunkTile16<kBlock>::kChunks;
  return halves16(u.unit + 2 * (128 * kChunks + 16 * ((off + shift / 8 - 16 * kChunks) / 2)));
}

// The 16 little-endian dwords at byte off of every row (in place: a gather; a ChunkTile16: two
// of the tail's 2-byte units, so off must lie in the tail, off - 16 kChunks even).
template <typename TileT>
inline __m512i gather_dword(const SuperBlock<TileT>& u, int64_t off) { return gather_dword(u.t, u.sb + off); }
template <int64_t kBlock>
inline __m512i gather_dword(const ChunkSuperBlock<kBlock>& u, int64_t off) {
  constexpr int64_t kChunks = ChunkTile16<kBlock>::kChunks;
  const uint8_t* unit = u.unit + 2 * (128 * kChunks + 16 * ((off - 16 * kChunks) / 2));
  const __m512i lo = _mm512_cvtepu16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(unit)));
  const __m512i hi = _mm512_cvtepu16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(unit + 32)));
  return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}

// Block b of a Q8_0 tile by its index: v[k] lane L = q[4k..4k+3] of row L (as u8 q + 128 after
// the caller's bias), the 16 scales returned. The in-place Tile reads the file's offsets; the
// Q8Tile16 finds the block with a shift and a multiply instead of the two divisions by 34 of
// the offset accessors above (per block, ~45 scalar instructions that share ports 0 and 5
// with the vector work on Intel cores; BENCHMARKS 29).
inline __m512 q8_0_block(const Tile& t, int64_t b, __m512i* v) {
  const int64_t off = b * static_cast<int64_t>(sizeof(quant::BlockQ8_0));
  load_transposed32(t, off + 2, v);
  return gather_half(t, off, 0);
}
inline __m512 q8_0_block(const Q8Tile16& t, int64_t b, __m512i* v) {
  // pair unit b / 2: [0, 64) the two blocks' 16 scales each, then each block's 8 vectors
  const uint8_t* unit = t.p + (b >> 1) * (2 * kQ8PairBytes);
  const int64_t odd = b & 1;
  const uint8_t* q = unit + 64 + 512 * odd;
  #pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) v[k] = load64(q + 64 * k);
  return halves16(unit + 32 * odd);
}

// acc += dot4(w (u8), the 4 int8 values at a broadcast to every lane). The activations are
// an embedded-broadcast memory operand (GCC does not fold the broadcast into vpdpbusd itself).
inline __m512i dpbusd_bcast(__m512i acc, __m512i w, const int8_t* a) {
  __asm__("vpdpbusd %[a]%{1to16%}, %[w], %[acc]" : [acc] "+v"(acc) : [w] "v"(w), [a] "m"(*reinterpret_cast<const int32_t*>(a)));
  return acc;
}

// Integer dot products of one activation block (32 values at a) with the 8 transposed weight
// vectors, starting from init. Two chains (even and odd k) for latency; integer sums are exact.
inline __m512i block_dot(const __m512i* v, const int8_t* a, __m512i init) {
  __m512i s0 = dpbusd_bcast(init, v[0], a);
  __m512i s1 = dpbusd_bcast(_mm512_setzero_si512(), v[1], a + 4);
  s0 = dpbusd_bcast(s0, v[2], a + 8);
  s1 = dpbusd_bcast(s1, v[3], a + 12);
  s0 = dpbusd_bcast(s0, v[4], a + 16);
  s1 = dpbusd_bcast(s1, v[5], a + 20);
  s0 = dpbusd_bcast(s0, v[6], a + 24);
  s1 = dpbusd_bcast(s1, v[7], a + 28);
  return _mm512_add_epi32(s0, s1);
}

// Integer dot products of 16 activation values with 4 weight vectors (one group of 16).
inline __m512i group_dot(const __m512i* v, const int8_t* a, __m512i init) {
  __m512i s0 = dpbusd_bcast(init, v[0], a);
  __m512i s1 = dpbusd_bcast(_mm512_setzero_si512(), v[1], a + 4);
  s0 = dpbusd_bcast(s0, v[2], a + 8);
  s1 = dpbusd_bcast(s1, v[3], a + 12);
  return _mm512_add_epi32(s0, s1);
}

template <typename RB>
void store_outputs(const __m512* acc, const RB& rb, float* y, int64_t n_out, int64_t o0, int n_valid) {
  const __mmask16 m = static_cast<__mmask16>((1u << n_valid) - 1u);
  for (int r = 0; r < rb.R; ++r) _mm512_mask_storeu_ps(y + (rb.r0 + r) * n_out + o0, m, acc[r]);
}

// One tile (16 outputs) for one activation row (M = 1) as a OneRowBlock, whose accumulator
// stays in a register (no store-to-load chain per block), or for M rows in passes of up to
// kRowBlock rows, each row's accumulator in acc.
template <typename TileT, typename TileFn>
inline void one_row_tile(const RangeJob& job, const TileT& t, int64_t n_steps, TileFn& tile_fn, int64_t o0, int n_valid) {
  const OneRowBlock rb(&job.acts);
  __m512 acc[1] = {_mm512_setzero_ps()};
  tile_fn(t, n_steps, rb, acc);
  store_outputs(acc, rb, job.y, job.w->n_out, o0, n_valid);
}

template <typename TileT, typename TileFn>
inline void row_block_tiles(const RangeJob& job, const TileT& t, int64_t n_steps, TileFn& tile_fn, int64_t o0, int n_valid,
                            __m512* acc) {
  for (int r0 = 0; r0 < job.M; r0 += kRowBlock) {
    const RowBlock rb{&job.acts, r0, min_int(kRowBlock, job.M - r0)};
    for (int r = 0; r < rb.R; ++r) acc[r] = _mm512_setzero_ps();
    tile_fn(t, n_steps, rb, acc);
    store_outputs(acc, rb, job.y, job.w->n_out, o0, n_valid);
  }
}

// Weights read in place: 16-row tiles over the file's rows. One instantiation per type, each
// with its tile body inlined (TileFn is a lambda), so no type's loop pays for another's code.
// M = 1 runs in its own function, flattened (every call inlined into it: GCC otherwise left
// the Q4_K decoder out of line there); the M-row loop is left to GCC's own choices, which
// changed for the worse (Q6_K at M = 5-9: 1.1-1.3x as long) when the decoders were forced
// inline everywhere or both loops shared one function.
template <typename TileFn>
[[gnu::flatten]] void in_place_tiles_one_row(const RangeJob& job, int64_t n_steps, TileFn& tile_fn) {
  const int64_t step_bytes = tile_step_bytes(*job.w, n_steps);
  for (int64_t o0 = job.o_begin; o0 < job.o_end; o0 += kLanes) {
    const int n_valid = static_cast<int>(job.o_end - o0 < kLanes ? job.o_end - o0 : kLanes);
    one_row_tile(job, make_tile(*job.w, o0, n_valid, step_bytes), n_steps, tile_fn, o0, n_valid);
  }
}

// kOneRow = false: no M = 1 function (the AMX tiles, which never see M = 1).
template <bool kOneRow = true, typename TileFn>
void in_place_tiles(const RangeJob& job, int64_t n_steps, TileFn tile_fn) {
  if constexpr (kOneRow) {
    if (job.M == 1) return in_place_tiles_one_row(job, n_steps, tile_fn);
  }
  const WeightMatrix& w = *job.w;
  __m512 acc[kRowBlock];  // (kRowBlock) one accumulator per activation row: 16 outputs
  const int64_t step_bytes = tile_step_bytes(w, n_steps);
  for (int64_t o0 = job.o_begin; o0 < job.o_end; o0 += kLanes) {
    const int n_valid = static_cast<int>(job.o_end - o0 < kLanes ? job.o_end - o0 : kLanes);
    const Tile t = make_tile(w, o0, n_valid, step_bytes);
    row_block_tiles(job, t, n_steps, tile_fn, o0, n_valid, acc);
  }
}

// The 16-row tile of rows o0..o0 + 15 (o0 a multiple of 16) of a Tiles16 matrix whose 8-row
// tiles are tile8_bytes, read in n_steps block iterations of step_bytes = tile16_step_bytes
// (exactly 2 tile8_bytes / n_steps, but for Q8_0 with an odd block count: the prefetch then runs
// slightly ahead). The step is computed once per call, not per tile (an integer division).
inline int64_t tile16_step_bytes(int64_t tile8_bytes, int64_t n_steps) { return 2 * tile8_bytes / n_steps; }
template <typename TileT>
inline TileT tile16(const WeightMatrix& w, int64_t o0, int64_t tile8_bytes, int64_t step_bytes) {
  TileT t;
  t.p = static_cast<const uint8_t*>(w.data) + (o0 / 8) * tile8_bytes;
  t.step_bytes = step_bytes;
  return t;
}

// M = 1, flattened: as in_place_tiles_one_row.
template <typename TileT, typename TileFn>
[[gnu::flatten]] void tiles16_one_row(const RangeJob& job, int64_t tile8_bytes, int64_t n_steps, TileFn& tile_fn) {
  const int64_t step_bytes = tile16_step_bytes(tile8_bytes, n_steps);
  for (int64_t o0 = job.o_begin; o0 < job.o_end; o0 += kLanes) {
    const int n_valid = static_cast<int>(job.o_end - o0 < kLanes ? job.o_end - o0 : kLanes);
    TileT t = tile16<TileT>(*job.w, o0, tile8_bytes, step_bytes);
    set_one_row_prefetch(t, job.decode_prefetch);
    one_row_tile(job, t, n_steps, tile_fn, o0, n_valid);
  }
}

// A matrix in a Tiles16 layout (matmul_internal.h): each 16-row tile one sequential stream.
// job.o_begin is a multiple of 16 (matmul's chunks). kOneRow = false: as in_place_tiles.
template <typename TileT, bool kOneRow = true, typename TileFn>
void tiles16(const RangeJob& job, int64_t tile8_bytes, int64_t n_steps, TileFn tile_fn) {
  if constexpr (kOneRow) {
    if (job.M == 1) return tiles16_one_row<TileT>(job, tile8_bytes, n_steps, tile_fn);
  }
  const WeightMatrix& w = *job.w;
  __m512 acc[kRowBlock];  // (kRowBlock) one accumulator per activation row: 16 outputs
  const int64_t step_bytes = tile16_step_bytes(tile8_bytes, n_steps);
  for (int64_t o0 = job.o_begin; o0 < job.o_end; o0 += kLanes) {
    const int n_valid = static_cast<int>(job.o_end - o0 < kLanes ? job.o_end - o0 : kLanes);
    TileT t = tile16<TileT>(w, o0, tile8_bytes, step_bytes);
    set_rows_prefetch<TileT::kKQuant>(t, job.verify_prefetch);
    row_block_tiles(job, t, n_steps, tile_fn, o0, n_valid, acc);
  }
}

// A tile function as a lambda (its type names the function, so callers inline it).
#define SPECDEC_TILE(...) [](const auto& t, int64_t n, const auto& rb, __m512* acc) { __VA_ARGS__(t, n, rb, acc); }

}  // namespace
}  // namespace specdec::matmul_detail
