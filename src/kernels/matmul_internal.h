// kernels/matmul_internal.h — the pieces behind matmul() (internal to the kernels layer).
//
// Two families of weight types:
//  - float weights (F32, F16, BF16): each weight value is converted to f32 and multiplied with
//    the f32 activations (one FMA chain per activation row, fixed order per ISA).
//  - quantized weights: each activation row is quantized to 8 bits in blocks of 32
//    (x[i] ~= d_blk * a[i]); integer dot products of the weights' and the activations' 8-bit
//    values are exact, and the float accumulation order is fixed per ISA and never depends on M.
//    AVX2 and AVX-512 use tiled kernels (matmul_tiles_avx2.cpp, matmul_tiles_avx512.cpp) that
//    read the weight blocks in place, transposed so that one vector lane holds one weight row,
//    and scale each block's exact integer dot product with one float step (AVX-512 has its own
//    16-row tiles with the AVX2 tiles' formulas for every quantized type: the same bits on
//    both). The scalar path first decodes ("unpacks") every weight row into signed
//    8-bit values q and scales so that
//        w[i] = scale16[i / 16] * q[i] + min16[i / 16]
//    then  dot(w, x) ~= sum_lanes scale * d * (sum of 4 products q*a)  +  sum_g min16[g] * s16[g]
//    with s16[g] = d * (sum of a over the 16 values of group g).
//
// The per-ISA translation units (matmul_avx2.cpp, matmul_avx512.cpp) only see raw pointers
// (no std containers), so no inline library code compiled with wide-ISA flags can leak into
// the baseline build through the linker's choice of a weak symbol.
#pragma once

#include <cstdint>

#include "specdec/cpu.h"
#include "specdec/kernels.h"

namespace specdec::matmul_detail {

// Quantized rows are padded with zeros to a multiple of kPadValues values; the zero padding
// adds exact zeros to every sum, so results equal those of the unpadded row.
constexpr int64_t kPadValues = 64;
// Activation rows are processed in blocks of at most this many rows per weight pass (a block's
// 8-bit activations stay cache-resident while each weight row is applied to all of them).
constexpr int kRowBlock = 64;

// Rows past M that the activation values and the block-major terms hold for a call on AMX
// (unused): the AMX tiles read 16 activation rows at a time and ignore the rows past M.
constexpr int kAmxActRowSlack = 15;

constexpr int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }
constexpr int64_t padded_values(int64_t n_in) { return round_up(n_in, kPadValues); }
// Groups of 16 values per row, padded to a multiple of 16 groups (one AVX-512 register).
constexpr int64_t padded_groups(int64_t n_in) { return round_up(padded_values(n_in) / 16, 16); }
// Row strides of the quantized activations: one 64-byte line more than the padding, so that
// the M rows' streams (read side by side by every tile) do not map to the same L1 sets. With
// a stride of n_pad = 8,192 bytes all rows alias modulo 4 KiB, and 9 rows' values and scales
// compete for the 8 ways of one set (measured: a 9-row Q4_K product with n_in = 8,192 took
// 1.5x as long per row as one with n_in = 2,048).
constexpr int64_t act_row_stride(int64_t n_in) { return padded_values(n_in) + 64; }
constexpr int64_t act_group_stride(int64_t n_in) { return padded_groups(n_in) + 16; }

// M activation rows quantized to 8 bits in blocks of 32 (matmul_activations.cpp).
struct QuantizedActs {
  int64_t n_pad = 0;          // padded_values(n_in)
  int64_t n_groups_pad = 0;   // padded_groups(n_in)
  // Row strides of the arrays (act_row_stride, act_group_stride): values rows start
  // row_stride bytes apart, the per-block arrays' rows row_stride / 32 entries apart.
  int64_t row_stride = 0;
  int64_t group_stride = 0;   // entries per row of sums16 and neg32_sums16
  int8_t* values = nullptr;   // (M, row_stride) a = round(x / d), |a| <= 127, zero padding to n_pad
  float* scales32 = nullptr;  // (M, row_stride / 32) d of each block of 32 values
  float* sums16 = nullptr;    // (M, group_stride) d * sum(a) over each group of 16 values
  // Per-block terms for the tiled kernels (matmul_tiles_avx512.cpp), exact integers:
  int32_t* neg128_sums32 = nullptr;  // (M, row_stride / 32) -128 * sum(a) over each block of 32
  int32_t* neg32_sums16 = nullptr;   // (M, group_stride) -32 * sum(a) over each group of 16
  float* sums32 = nullptr;           // (M, row_stride / 32) sum(a) over each block of 32, as float
  // The same d and sum(a) of each block, block-major, for the AMX tiles (matmul_tiles_amx.cpp):
  // a block's rows side by side, so 16 rows' terms are one base address and 16 offsets. Null
  // (and not written) unless the call runs on AMX: on the decode path they would be 2 more
  // cache lines written per block.
  int64_t block_stride = 0;       // entries per block: the rows allocated (M + kAmxActRowSlack)
  float* scales32_bm = nullptr;   // (row_stride / 32, block_stride) d of block b of row r at b * block_stride + r
  float* sums32_bm = nullptr;     // (row_stride / 32, block_stride) sum(a) over block b of row r, as float
};

// The activations from row r on: every array's pointer moved down r rows.
inline QuantizedActs acts_from_row(const QuantizedActs& a, int64_t r) {
  QuantizedActs v = a;
  v.values += r * a.row_stride;
  v.scales32 += r * (a.row_stride / 32);
  v.sums16 += r * a.group_stride;
  v.neg128_sums32 += r * (a.row_stride / 32);
  v.neg32_sums16 += r * a.group_stride;
  v.sums32 += r * (a.row_stride / 32);
  if (a.scales32_bm != nullptr) {
    v.scales32_bm += r;
    v.sums32_bm += r;
  }
  return v;
}

// Stores the terms of block b (values 32b..32b+31) of the first row of `row`: its scale d and
// the integer sums of its two groups of 16 quantized values. Every quantizer ends a block
// with this, so they agree on the terms by construction.
inline void store_block_terms(const QuantizedActs& row, int64_t b, float d, int sum0, int sum1) {
  row.scales32[b] = d;
  row.sums16[2 * b] = d * static_cast<float>(sum0);
  row.sums16[2 * b + 1] = d * static_cast<float>(sum1);
  row.neg32_sums16[2 * b] = -32 * sum0;
  row.neg32_sums16[2 * b + 1] = -32 * sum1;
  row.neg128_sums32[b] = -128 * (sum0 + sum1);
  row.sums32[b] = static_cast<float>(sum0 + sum1);
  if (row.scales32_bm != nullptr) {
    row.scales32_bm[b * row.block_stride] = d;
    row.sums32_bm[b * row.block_stride] = static_cast<float>(sum0 + sum1);
  }
}

// Zeros the padding of the first row of `row`: values n_in..n_pad and their blocks' terms.
void zero_act_padding(const QuantizedActs& row, int64_t n_in);

// Requires: x (M, n_in) row-major, n_in a multiple of 32, out's arrays sized for M rows.
// Guarantees: each row's output depends only on that row (round half away from zero, scale
// d = max|x| / 127 per block of 32; a block with a non-finite value gets d = NaN so the
// matmul result is NaN). Cost: O(M * n_in), scalar.
void quantize_activations(const float* x, int M, int64_t n_in, const QuantizedActs& out);
// The same bytes and scales bit for bit, vectorised (matmul_activations_avx512.cpp).
void quantize_activations_avx512(const float* x, int M, int64_t n_in, const QuantizedActs& out);
// The same again with AVX2 instructions (matmul_activations_avx2.cpp), for the AVX2 path.
void quantize_activations_avx2(const float* x, int M, int64_t n_in, const QuantizedActs& out);

// One weight row decoded for the scalar integer kernel (scratch owned by the calling thread).
struct UnpackedRow {
  int8_t* q = nullptr;           // (n_pad) signed 8-bit weight values, zero padding
  float* scale16 = nullptr;      // (n_groups_pad) scale of each group of 16 values
  float* min16 = nullptr;        // (n_groups_pad) additive term of each group of 16 values
};

// Decodes one weight row of a quantized type (not F32/F16/BF16) into `out`, zero-filling the
// padding. Returns true when some min16 is non-zero (types with an additive term).
// Cost: O(n_in) scalar.
bool unpack_row_scalar(DType type, const void* row, int64_t n_in, const UnpackedRow& out);

// ---- The Tiles16 layouts (Q8_0Tiles16, Chunks16Tiles16, Blocks32PairTiles16; the AVX-512 and
// AMX tiles'): rows in tiles of 16 (zero rows past n_out), each made of the two 8-row tiles of
// the Tiles8 forms below (rows 0-7: half 0, rows 8-15: half 1), unit by unit (a pair of blocks,
// a super-block: U bytes per 8-row tile): unit p at 2 p U. Inside a unit, the 8-row granule at
// offset x of the Tiles8 form (32 bytes of a transposed vector, or 16 bytes of 2-byte units;
// a region of g-byte granules starting at r) lies at 2 x - (x - r) % g + half * g: the 16 rows'
// halves side by side, so each transposed vector is one aligned 64-byte load and each set of
// 16 binary16 values one 32-byte load. A 16-row tile is one sequential stream, as a thread's
// run of tiles is: read from memory at M = 1, the two 8-row streams of a pair of Tiles8 tiles
// (the AVX-512 path's layout until 2026-11-27) and their prefetch ran 15-19% slower in a
// whole decode (BENCHMARKS 27). is_tiles16: true for these (the AVX-512 path's layouts; every
// other repacked layout is a Tiles8 one, the AVX2 path's).
constexpr bool is_tiles16(WeightLayout layout) {
  return layout == WeightLayout::Q8_0Tiles16 || layout == WeightLayout::Chunks16Tiles16 ||
         layout == WeightLayout::Blocks32PairTiles16 || layout == WeightLayout::Q6KTiles16;
}

// ---- The FloatRows8 layout (WeightLayout::FloatRows8: F32, F16, BF16 with n_in a multiple of
// kFloatChunkValues; written by repack_rows, read by the float tiles of matmul_avx2.cpp and
// matmul_avx512.cpp). Rows in groups of 8 (the last group zero-filled past n_out), a group
// taking 8 row_bytes; inside it, chunk c (values 16c..16c+15) of row L at (8c + L) chunk bytes
// (64 for F32, 32 for F16 and BF16). A float tile reads each of its rows chunk after chunk in
// either layout: the chunks of a row are float_chunk_step(w) bytes apart (16 values' bytes in
// row-major order, 8 times that here), so the operations and the bits are the same, and a
// decode's 8-row tile reads one sequential stream instead of 8. On the Zen 4 VM of BENCHMARKS
// 35, a loop over a 1B F16 decode's bytes so read 1.00-1.06 of the read probe when the memory
// was fast, against 0.74-0.80 for 8 row streams with the tiles' prefetches and 0.93-0.97 without.
constexpr int64_t kFloatChunkValues = 16;
constexpr int64_t kFloatGroupRows = 8;
namespace {  // internal linkage: compiled into wide-ISA files too (see the float prefetch below)

// Bytes of one chunk (kFloatChunkValues values) of a float row of w.
inline int64_t float_chunk_bytes(const WeightMatrix& w) {
  return static_cast<int64_t>(w.row_bytes) / w.n_in * kFloatChunkValues;
}

// Bytes from a float row's chunk to its next (values 16c.. to 16(c + 1)..) in w's layout.
inline int64_t float_chunk_step(const WeightMatrix& w) {
  const int64_t chunk = float_chunk_bytes(w);
  return w.layout == WeightLayout::FloatRows8 ? kFloatGroupRows * chunk : chunk;
}

// Where float row o's first chunk lies in w's layout.
inline const uint8_t* float_row_start(const WeightMatrix& w, int64_t o) {
  const auto* base = static_cast<const uint8_t*>(w.data);
  if (w.layout != WeightLayout::FloatRows8) return base + o * static_cast<int64_t>(w.row_bytes);
  const int64_t chunk = float_chunk_bytes(w);
  return base + (o / kFloatGroupRows) * kFloatGroupRows * static_cast<int64_t>(w.row_bytes) + (o % kFloatGroupRows) * chunk;
}
}  // namespace

// ---- The Q8_0Tiles8 layout (WeightLayout::Q8_0Tiles8; written by repack_rows in repack.cpp, read
// by matmul_repacked_avx2.cpp). Rows in tiles of 8 (the last tile zero-filled past n_out); a
// tile's blocks of 32 values in pairs (the last pair's second block zero when n_in / 32 is odd):
//   pair p of tile t, at data + t * q8_tile_bytes(n_in) + p * kQ8PairBytes:
//     [ 0,  16)  binary16 d of block 2p of rows 0..7 (row L at bytes 2L, 2L + 1)
//     [16,  32)  the same for block 2p + 1
//     [32, 288)  the q of block 2p: vector k (k < 8) at 32 k, its lane L (bytes 4L..4L+3) =
//                q[4k..4k+3] of row L: exactly the in-place AVX2 tile's transposed vectors
//     [288, 544) the same for block 2p + 1
// Every vector is 32-byte aligned when data is, and a tile is 8 x 34 bytes per block (the
// file's bytes) plus the odd block's padding.
constexpr int64_t kQ8PairBytes = 544;
constexpr int64_t q8_pairs(int64_t n_in) { return (n_in / 32 + 1) / 2; }
constexpr int64_t q8_tile_bytes(int64_t n_in) { return q8_pairs(n_in) * kQ8PairBytes; }

// ---- The Chunks16Tiles8 layout (Q2_K, Q3_K, Q4_K, Q5_K: super-blocks of B = 84, 110, 144, 176 bytes;
// Q6_K's 210-byte super-blocks go to Q6KTiles8 / Q6KTiles16 instead).
// Rows in tiles of 8 (zero rows past n_out); a tile's super-blocks s in order, each
// chunk16_block_bytes(B) bytes:
//   chunk c < B / 16, at 128 c: 4 vectors of 32 bytes; vector k's lane L (bytes 4L..4L+3) =
//     bytes 16c + 4k .. 16c + 4k + 3 of row L's super-block: the in-place tile's
//     load_transposed16(16 c) result, stored;
//   then the tail (bytes 16 (B / 16) .. B, e.g. Q3_K's last scales and d) in 2-byte units u: unit u of
//     row L at 16 u + 2 L, padded to 32 bytes.
// Every vector is 32-byte aligned when data is; 8 x B bytes per super-block, plus the tail's
// padding (Q3_K: 896 instead of 880 per 8 rows).
constexpr int64_t chunk16_block_bytes(int64_t block_bytes) {
  return block_bytes / 16 * 128 + round_up(8 * (block_bytes % 16), 32);
}

// ---- The Q6KTiles8 layout (Q6_K on the AVX2 path; written by repack_rows, read by
// matmul_repacked_q6k_avx2.cpp). Rows in tiles of 8 (zero rows past n_out); a tile's
// super-blocks s in order, each kQ6kUnitBytes = 1,696 bytes (Chunks16Tiles8's size for Q6_K):
//   [0, 1536)     48 vectors of 32 bytes: block j (values 32j..32j+31 of the super-block, j < 8)
//                 at 192 j, its group h (values 16h..16h+15 of the block) at 192 j + 96 h: 3
//                 vectors E0, E1, E2 holding the 4 vectors V0..V3 of that group, where lane L of
//                 Vk holds the 6-bit values u = q + 32 (0..63) of values 4k..4k+3 of the group
//                 of row L. Byte e of Ei's lane: bits 0-5 = that byte of Vi, bits 6-7 = bits
//                 2i, 2i + 1 of that byte of V3. Rebuilding V0..V2 is one AND each; V3 is
//                 (E0 >> 6 & 3) | (E1 >> 4 & 12) | (E2 >> 2 & 48): 2.75 operations per vector
//                 against 4.25 from the file's split of low nibbles and high bit pairs.
//   [1536, 1664)  the 16 int8 scales: group g (values 16g..16g+15) of row L at 1536 + 8 g + L,
//                 so one sign-extending 8-byte load gives a group's scales in 8 lanes;
//   [1664, 1680)  d (binary16) of row L at 1664 + 2 L;  [1680, 1696) zero padding.
// Every vector is 32-byte aligned when data is. Not a permutation of the file's bytes: the
// repack and copy_weight_row encode and decode the values (repack.cpp).
// Q6KTiles16 (the AVX-512 path's): two such 8-row tiles interleaved by the Tiles16 rule above,
// with granules of 32 bytes for the vectors, 8 for a group's scales and 16 for d and the
// padding: unit s of a 16-row tile at 2 s kQ6kUnitBytes holds each of the 48 vectors as one
// aligned 64-byte vector (lane L: row L), group g's 16 scales at 2 kQ6kScalesOffset + 16 g
// (one sign-extending 16-byte load) and the 16 rows' d at 2 kQ6kDOffset (one 32-byte load).
// The AVX-512 kernel reads it in matmul_repacked_q6k_avx512.cpp.
constexpr int64_t kQ6kUnitBytes = 1696;
constexpr int64_t kQ6kScalesOffset = 1536;
constexpr int64_t kQ6kDOffset = 1664;

// ---- The legacy types' 8-row pair tiles (Q4_0, Q4_1, Q5_0, Q5_1 with n_in a multiple of 64):
// WeightLayout::Blocks32PairTiles8 (read by matmul_repacked_legacy_avx2.cpp), and two of them
// interleaved as above in Blocks32PairTiles16 (the AVX-512 legacy tile). Rows in tiles of 8 (zero rows past n_out);
// a tile's pairs of blocks p (values 64p .. 64p + 63) in order, each legacy_pair_bytes(B) =
// 8 x 2 x B bytes for blocks of B bytes (18, 20, 22, 24):
//   [0, 128)    qs of block 2p: vector k (k < 4) at 32 k, its lane L (bytes 4L..4L+3) =
//               qs[4k..4k+3] of row L: the in-place tile's load_transposed16(qs) result, stored
//   [128, 256)  the same for block 2p + 1
//   then the blocks' other bytes (d, then m for Q4_1/Q5_1, then qh for Q5_0/Q5_1: the file's
//   order) in 2-byte units, block 2p's then block 2p + 1's: unit u of row L at 256 + 16 u + 2 L.
// Every vector is 32-byte aligned when data is, and a tile holds exactly the file's bytes.
constexpr int64_t legacy_pair_bytes(int64_t block_bytes) { return 16 * block_bytes; }
constexpr int64_t legacy_tile_bytes(int64_t n_in, int64_t block_bytes) { return n_in / 64 * legacy_pair_bytes(block_bytes); }

// A legacy block's fields (quant_blocks.h: d, m for Q4_1/Q5_1, qh for Q5_0/Q5_1, then 16 bytes of
// nibbles), for the tiles' accessors and the layout above.
template <bool kFiveBit, bool kMin>
struct LegacyFields {
  static constexpr int64_t kBytes = 18 + (kMin ? 2 : 0) + (kFiveBit ? 4 : 0);  // sizeof the block
  static constexpr int64_t kQhOffset = kMin ? 4 : 2;                             // offsetof qh
  static constexpr int64_t kQsOffset = kBytes - 16;                              // offsetof qs
  static constexpr int64_t kUnits = kQsOffset / 2;  // 2-byte units before qs (Blocks32PairTiles16)
  static constexpr int64_t kPairBytes = legacy_pair_bytes(kBytes);
};

// Activation rows [r0, r0 + R) of a job, with row pointers into the quantized activations, for
// the tiled kernels. Internal linkage: each per-ISA file gets its own copy, so no copy built
// with wide-ISA flags can be picked by the linker for another file.
namespace {
struct RowBlock {
  // Where the tiles prefetch weights: into L2 (prefetcht1) when several rows are multiplied.
  // A weight block is read once into registers and applied to every row, while the rows'
  // activations are read again for each weight tile: L1 is theirs, and weight lines prefetched
  // into it evicted them (BENCHMARKS 30: a 9-row Q4_K_M verify in 0.66x the time on Zen 4).
  static constexpr bool kPrefetchIntoL1 = false;
  // One activation row known at compile time (OneRowBlock: decode). The AVX-512 K-quant tiles
  // choose two things by it: the weight prefetch spread over a super-block's 8 blocks (one row)
  // or one burst per super-block (several: BENCHMARKS 31, no difference at M = 9), and the Q6_K
  // vectors held across a super-block's parts (one row) or reloaded per part (several).
  static constexpr bool kOneRow = false;
  const QuantizedActs* acts;
  int r0, R;
  int64_t stride32() const { return acts->row_stride / 32; }
  const int8_t* values(int r) const { return acts->values + (r0 + r) * acts->row_stride; }    // (n_pad)
  float da(int r, int64_t b) const { return acts->scales32[(r0 + r) * stride32() + b]; }
  int32_t neg128_sum32(int r, int64_t b) const { return acts->neg128_sums32[(r0 + r) * stride32() + b]; }
  int32_t neg32_sum16(int r, int64_t g) const { return acts->neg32_sums16[(r0 + r) * acts->group_stride + g]; }
  const int32_t* neg32_sum16_ptr(int r, int64_t g) const { return acts->neg32_sums16 + (r0 + r) * acts->group_stride + g; }
  float sum32(int r, int64_t b) const { return acts->sums32[(r0 + r) * stride32() + b]; }
};
// A RowBlock of one row known at compile time (decode): a tile body templated on its row
// block keeps the one accumulator in a register instead of acc[0] in memory (a store-to-load
// chain per block). The same operations, so the same bits.
struct OneRowBlock : RowBlock {
  static constexpr int R = 1;  // hides RowBlock::R, which is 1 too (for code that takes a RowBlock)
  // Decode's weights go to L1: one row of activations leaves room, and the L1 prefetch read
  // faster than the L2 one at M = 1 (BENCHMARKS 27b).
  static constexpr bool kPrefetchIntoL1 = true;
  static constexpr bool kOneRow = true;
  explicit OneRowBlock(const QuantizedActs* a) : RowBlock{a, 0, 1} {}
};
}  // namespace

// Blocked float products (AVX-512 and AVX2; prefill-sized M): float_range_blocked in
// matmul_avx512.cpp and matmul_avx2.cpp.
// A thread's outputs go in blocks of kFloatBlockWeights weight rows, its inputs in blocks of
// kFloatBlockValues values; each such weight block (128 KiB of F16, in L2) is applied to all M
// rows, which read their values from FloatBlockScratch::x (a block's six rows in L1 at a time).
// Same bits as the unblocked tiles (each (row, output) accumulator is saved to and reloaded from
// FloatBlockScratch::acc between input blocks: exact). Measured on a Zen 5 VM (docs/BENCHMARKS.md
// section 43), 1B-shape matrices, 2 threads: at M = 64 1.15-1.3x as fast on AVX-512, 1.0-1.2x on
// AVX2; at M = 32 1.1-1.3x on AVX-512 and 0.9-1.1x on AVX2; at M = 17 F32 0.8-1.1x (there the
// unblocked tiles' prefetches keep up with memory better).
constexpr int kFloatBlockedMinRowsAvx512 = 32;
constexpr int kFloatBlockedMinRowsAvx2 = 64;
inline int float_blocked_min_rows(Isa isa) {
  return vector_isa(isa) == Isa::Avx512 ? kFloatBlockedMinRowsAvx512 : kFloatBlockedMinRowsAvx2;
}
constexpr int64_t kFloatBlockWeights = 64;   // weight rows (outputs) per block
constexpr int64_t kFloatBlockValues = 1024;  // input values per block
constexpr int64_t kFloatBlockAccStride = kFloatBlockWeights * 16 + 16;  // floats per activation row of acc
// floats per activation row of FloatBlockScratch::x (n_in a multiple of 16): 64-byte aligned
// rows, whose starts are not a multiple of 4 KiB apart when n_in is a multiple of 64
constexpr int64_t float_block_x_stride(int64_t n_in) { return n_in + 16; }
// x is one copy of the call's rows, shared by its threads, made with the rows' other steps
// before any product (matmul.cpp: matmul_group; M x n_in floats). It had been one input block
// of every row, copied again by each thread for each block of outputs: 9% of a 1B F16 prefill
// call's time on a Zen 5 VM, and the calls took 1.05-1.15x as long (BENCHMARKS 45). acc is
// the thread's own.
struct FloatBlockScratch {
  float* acc = nullptr;  // (M, kFloatBlockAccStride): (row, block output, lane) accumulators
  float* x = nullptr;    // (M, x_stride), 64-byte aligned: every row's n_in values
  int64_t x_stride = 0;  // float_block_x_stride(n_in)
};

// Which build of the AVX2 path's quantized kernels a call runs (matmul_avx2_rows.h): vpmaddubsw
// products (Isa::Avx2), or vpdpbusd ones (Isa::Avx2Vnni) in the AVX-VNNI or the EVEX encoding.
// The same bits in all three.
enum class Avx2Products { Maddubs = 0, AvxVnni = 1, EvexVnni = 2 };

// Everything one thread needs to compute outputs [o_begin, o_end) of all M rows.
struct RangeJob {
  const WeightMatrix* w = nullptr;
  Avx2Products avx2_products = Avx2Products::Maddubs;  // on the AVX2 path
  const float* x = nullptr;      // (M, n_in) for float weights
  int M = 0;
  DecodePrefetch decode_prefetch = DecodePrefetch::Light;  // for M = 1 (cpu.h)
  VerifyPrefetch verify_prefetch = VerifyPrefetch::Far;    // for M > 1 on the AVX-512 K-quant tiles (cpu.h)
  float* y = nullptr;            // (M, n_out)
  QuantizedActs acts;            // for quantized weights
  UnpackedRow scratch;           // this thread's scratch (quantized weights)
  FloatBlockScratch float_blocks;  // this thread's scratch for the blocked float products; null: unblocked
  int64_t o_begin = 0, o_end = 0;
};

bool is_float_weight(DType type);

// AVX-512 VNNI kernels that read the quantized weight blocks directly (no unpacked copy) in
// tiles of 16 weight rows, one output per vector lane (matmul_tiles_avx512.cpp). Computes the
// same outputs as matmul_range_avx512 would for job's range, within the same error bounds.
// Returns false (doing nothing) for a type it does not cover. Any output range works: lanes
// are independent, so an output's bits do not depend on its tile or on M.
bool matmul_range_tiled_avx512(const RangeJob& job);

// The same tiles with AVX2 instructions, 8 weight rows per tile (matmul_tiles_avx2.cpp), plus
// every other quantized type; for a Chunks16Tiles8 matrix the same tiles read the stored
// transposed chunks (the same bits). For the types both files cover the same formulas, so the
// same bits as matmul_range_tiled_avx512.
bool matmul_range_tiled_avx2(const RangeJob& job);

// The repacked Q8_0 kernel (matmul_repacked_avx2.cpp): computes job's outputs from a
// Q8_0Tiles8 matrix with exactly the in-place AVX2 Q8_0 tile's operations (the same bits).
// job.o_begin must be a multiple of 8 (matmul's chunks are multiples of 16).
void matmul_range_repacked_avx2(const RangeJob& job);

// The repacked legacy kernel (matmul_repacked_legacy_avx2.cpp): job's outputs from a
// Blocks32PairTiles8 matrix (Q4_0, Q4_1, Q5_0, Q5_1) with the in-place AVX2 legacy tile's
// values, integer sums and float steps (the same bits).
void matmul_range_repacked_legacy_avx2(const RangeJob& job);

// The repacked Q6_K kernel (matmul_repacked_q6k_avx2.cpp): job's outputs from a Q6KTiles8
// matrix with the in-place AVX2 Q6_K tile's values, integer sums and float steps (the same bits).
// job.o_begin must be a multiple of 8 (matmul's chunks are multiples of 16).
void matmul_range_repacked_q6k_avx2(const RangeJob& job);

// The four AVX2 quantized kernels above built again with vpdpbusd products (Avx2Products):
// suffix _avxvnni for the AVX-VNNI (VEX) encoding, _evexvnni for the EVEX one. The same bits.
#define SPECDEC_DECLARE_AVX2_QUANT_KERNELS(suffix)                \
  bool matmul_range_tiled_avx2##suffix(const RangeJob& job);      \
  void matmul_range_repacked_avx2##suffix(const RangeJob& job);   \
  void matmul_range_repacked_legacy_avx2##suffix(const RangeJob& job); \
  void matmul_range_repacked_q6k_avx2##suffix(const RangeJob& job);
SPECDEC_DECLARE_AVX2_QUANT_KERNELS(_avxvnni)
SPECDEC_DECLARE_AVX2_QUANT_KERNELS(_evexvnni)
#undef SPECDEC_DECLARE_AVX2_QUANT_KERNELS

// The repacked Q6_K kernel of the AVX-512 path (matmul_repacked_q6k_avx512.cpp): job's outputs
// from a Q6KTiles16 matrix with the in-place AVX-512 Q6_K tile's values, integer sums and float
// steps (the same bits). job.o_begin must be a multiple of 16 (matmul's chunks).
void matmul_range_repacked_q6k_avx512(const RangeJob& job);

// AMX tiles (matmul_tiles_amx.cpp) for the Q8_0, Q4_K and Q5_K matrices, in place or
// repacked, and Q6_K in place (Q6KTiles16 stays on the VNNI tiles): the same bits as
// matmul_range_avx512 (which it calls for every other type and layout). Needs amx_detected(),
// job.acts.values readable kAmxActRowSlack rows past job.M, and the block-major terms
// (thread_acts with amx).
void matmul_range_amx(const RangeJob& job);
// The AVX-512 path runs calls of at least this many activation rows on AMX when amx_active():
// below, the VNNI tiles were faster for every type measured (BENCHMARKS section 20).
constexpr int kAmxMinRows = 32;
// Whether a matrix of `type` goes to the AMX tiles under `use` (cpu.h AmxUse), in a call of at
// least kAmxMinRows rows: matmul_group prepares the AMX activation terms only then, and
// matmul_range_amx leaves every other matrix to the VNNI tiles.
constexpr bool amx_takes(DType type, AmxUse use) {
  if (use == AmxUse::Off) return false;
  if (type == DType::Q4_K || type == DType::Q5_K) return true;
  return use == AmxUse::All && (type == DType::Q8_0 || type == DType::Q6_K);
}

// The float tiles' prefetch (matmul_avx2.cpp, matmul_avx512.cpp). Since BENCHMARKS 35 the SIMD
// paths read float matrices repacked (FloatRows8) when n_in is a multiple of 16: a decode's
// 8-row tile then reads one sequential stream, with no prefetch under DecodePrefetch::Light (on
// the Zen 4 VM a 1B F16 decode read ~1.0 of the read probe so, against ~0.8 for the row streams
// below when the memory was fast) and as a verify's under Deep (Intel: rows8_prefetch), and a
// tile of several activation rows prefetches each of its rows kFloatRows8PrefetchBytes of the
// group's stream ahead into L2 (rows8_prefetch: t(5) ~0.8x of the row-major tile's; with no
// prefetch, 1.5x). Row-major float rows (n_in not a multiple of
// 16, or --no-repack): a group of W weight rows is read as W interleaved streams (row k at the tile's pace), which the hardware prefetchers
// follow poorly, so each stream is prefetched ahead: into L2 (prefetcht1),
// kFloatOneRowPrefetchBytes / W bytes ahead for one activation row (decode) and
// kFloatPrefetchBytes / W for several; a decode also into L1 (prefetcht0),
// kFloatOneRowL1PrefetchBytes / W ahead. Past a row's end a stream goes on into the same row of
// the next groups (the rows are contiguous, so W rows further each). History: 4 KiB into L1
// (BENCHMARKS 28, a Zen 5 VM: 48-55 GB/s against 37-46 with the next group as one T2 stream); on
// the Zen 4 VM of BENCHMARKS 33, 16 KiB into L2 made a 1B F16 decode 0.83-0.89x as long and a
// 150M one (576-wide rows: 8 streams of 18 lines, too short for the hardware prefetchers)
// 0.68-0.73x, BF16 and F32 alike, and the 2 KiB into L1 on top 0.95x (1B). The quantized
// Tiles16 tiles, one stream each, stay at 4 KiB into L1 (16 or 32 KiB into L2 made their decode
// 1.1-1.17x as long there), but for Q8_0's decode, which reads fastest with none (BENCHMARKS
// 34a). Internal linkage, as RowBlock: no copy compiled with wide-ISA flags can serve another
// file.
namespace {
constexpr int64_t kFloatPrefetchBytes = 4096;           // into L2, all W streams together, several rows
constexpr int64_t kFloatOneRowPrefetchBytes = 16384;    // into L2, all W streams together, one row
constexpr int64_t kFloatOneRowL1PrefetchBytes = 2048;   // into L1, all W streams together, one row

// A prefetch distance in each of a group's row streams, as whole rows (each a group further on)
// and the rest: ahead = groups * row_bytes + rest.
struct StreamAhead {
  int64_t groups = 0, rest = 0;
};

struct RowPrefetch {
  int64_t row_bytes = 0;    // 0: none (a later row block, which finds the group in the caches)
  int64_t group_bytes = 0;  // W row_bytes: from a row to the same row of the next group
  StreamAhead l2, l1;       // l1.groups < 0: no L1 prefetch
  // FloatRows8 rows (row_bytes 0): each row's chunk this many bytes further on (whole chunk
  // steps; past a group's end, the same row of the next group), into L2; 0: none.
  int64_t chunk_ahead = 0;
};

constexpr StreamAhead stream_ahead(int64_t total_bytes, int64_t w_rows, int64_t row_bytes) {
  const int64_t ahead = (total_bytes / w_rows) & ~int64_t{63};
  const int64_t bytes = ahead > 64 ? ahead : 64;
  return StreamAhead{bytes / row_bytes, bytes % row_bytes};
}

// m_rows: the call's activation rows.
constexpr RowPrefetch row_prefetch(int64_t w_rows, int64_t row_bytes, int m_rows) {
  const bool one_row = m_rows == 1;
  return RowPrefetch{row_bytes, w_rows * row_bytes,
                     stream_ahead(one_row ? kFloatOneRowPrefetchBytes : kFloatPrefetchBytes, w_rows, row_bytes),
                     one_row ? stream_ahead(kFloatOneRowL1PrefetchBytes, w_rows, row_bytes) : StreamAhead{-1, 0}};
}

// FloatRows8 rows read by a tile of several activation rows, or by a decode's under
// DecodePrefetch::Deep and Burst: kFloatRows8PrefetchBytes of each group's stream ahead, rounded up to
// whole chunk steps (1B F16, BENCHMARKS 35: t(5) with none / 4 / 8 / 16 / 32 / 64 / 128 KiB
// ~124 / 92 / 74 / 65-73 / 66-67 / 67 / 69 ms, the row-major tiles ~83; decode on the Emerald
// Rapids VM of BENCHMARKS 36: 0.65-0.68 of the probe with none, 0.88-0.93 at 16 KiB, 0.92-0.97
// at 32 KiB, 0.88-0.93 at 64 KiB, 0.90 at 4 KiB into L1). A decode's tile under
// DecodePrefetch::Light takes none (the Zen 4 VMs' best: BENCHMARKS 35).
constexpr int64_t kFloatRows8PrefetchBytes = 32768;
constexpr RowPrefetch rows8_prefetch(int64_t chunk_step, int m_rows, DecodePrefetch decode) {
  RowPrefetch pf;
  if (m_rows > 1 || stream_tiles_prefetch_deep(decode))
    pf.chunk_ahead = (kFloatRows8PrefetchBytes + chunk_step - 1) / chunk_step * chunk_step;
  return pf;
}

// Byte offset from a row's start of the byte `a` ahead of byte pos (< row_bytes) in its stream.
constexpr int64_t stream_offset(const RowPrefetch& pf, const StreamAhead& a, int64_t pos) {
  const int64_t at = pos + a.rest;  // < 2 row_bytes
  return a.groups * pf.group_bytes + (at < pf.row_bytes ? at : pf.group_bytes + at - pf.row_bytes);
}

// Asks for the lines the W rows' streams will read ahead of byte `pos` (< row_bytes; call once
// per 64 bytes of a row). A hint: no fault past the matrix, no effect on results. always_inline:
// GCC deletes calls of out-of-line prefetch-only functions (it counts them as "const").
// FloatRows8 rows (pf.chunk_ahead): call once per chunk, `at` the rows' offset of the chunk.
// kChunkBytes: 32 (F16, BF16: rows 2j and 2j + 1 share each line, one prefetch for both) or 64.
template <int W, int kChunkBytes>
[[gnu::always_inline]] inline void prefetch_chunks(const RowPrefetch& pf, const uint8_t* const* rows, int64_t at) {
  if (pf.chunk_ahead == 0) return;
  constexpr int kRowsPerLine = 64 / kChunkBytes;
#pragma GCC unroll 8
  for (int k = 0; k < W; k += kRowsPerLine) __builtin_prefetch(rows[k] + at + pf.chunk_ahead, 0, 2);  // prefetcht1
}

// FloatRows8 rows [o_begin, o_end) (o_begin a multiple of 8) about to be read with pf: the
// first pf.chunk_ahead bytes of their stream, which the tiles' own prefetches (each that far
// ahead of its reads) never ask for.
[[gnu::always_inline]] inline void prefetch_rows8_start(const WeightMatrix& w, int64_t o_begin, int64_t o_end, const RowPrefetch& pf) {
  if (pf.chunk_ahead == 0) return;
  const uint8_t* start = float_row_start(w, o_begin);
  const int64_t bytes = (o_end - o_begin) * static_cast<int64_t>(w.row_bytes);
  const int64_t n = bytes < pf.chunk_ahead ? bytes : pf.chunk_ahead;
  for (int64_t b = 0; b < n; b += 64) __builtin_prefetch(start + b, 0, 2);  // prefetcht1
}

template <int W>
[[gnu::always_inline]] inline void prefetch_rows(const RowPrefetch& pf, const uint8_t* const* rows, int64_t pos) {
  if (pf.row_bytes == 0) return;
  const int64_t shift2 = stream_offset(pf, pf.l2, pos);
#pragma GCC unroll 8
  for (int k = 0; k < W; ++k) __builtin_prefetch(rows[k] + shift2, 0, 2);  // prefetcht1
  if (pf.l1.groups < 0) return;
  const int64_t shift1 = stream_offset(pf, pf.l1, pos);
#pragma GCC unroll 8
  for (int k = 0; k < W; ++k) __builtin_prefetch(rows[k] + shift1, 0, 3);  // prefetcht0
}
}  // namespace

// Per-ISA implementations; each computes y[r][o] for all r < M and o in [o_begin, o_end).
void matmul_range_scalar(const RangeJob& job);
void matmul_range_avx2(const RangeJob& job);
void matmul_range_avx512(const RangeJob& job);

}  // namespace specdec::matmul_detail
