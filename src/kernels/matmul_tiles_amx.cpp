// AMX kernels for Q8_0, Q4_K, Q5_K (in place or repacked) and Q6_K (in place: a repacked Q6_K
// matrix, Q6KTiles16, stays on the VNNI tiles) matrices, for calls of several
// activation rows on CPUs with AMX-INT8 (Sapphire Rapids and later). Compiled with the AVX-512
// and AMX flags; reached only through matmul_range_amx. Only raw pointers cross this file's
// boundary.
//
// The same bits as the VNNI tiles (matmul_tiles_avx512.cpp). A tile product C += A B gives
// each (activation row, weight row) the exact integer dot product of one block of 32 values
// (Q6_K: one group of 16), the integer the VNNI tiles' vpdpbusd chains sum to; the AVX-512
// float steps that follow are the VNNI tiles' own, in their order, with the scales decoded by
// the same functions (matmul_kquant_blocks_avx512.h). So the choice between AMX and VNNI never
// changes a bit, and it can depend on M.
//
// Operands, per 16-row weight tile and block of 32 values (the tile registers' shapes):
//   A (16 activation rows, 32 bytes): the 8-bit activations, read in place (row stride);
//       rows past M are read (kAmxActRowSlack) and their results ignored.
//   B (8 rows, 64 bytes): row k, dword n = values 4k..4k+3 of weight row n: exactly the VNNI
//       tiles' transposed vector v[k], decoded to a buffer once per weight tile and row block
//       (64 blocks at a time) and shared by every activation row.
//   C (16 activation rows, 16 int32) = A B, stored, then scaled per row with AVX-512: the
//       16 rows' accumulators stay in registers, and their d and sum(a) are broadcast from the
//       block-major copies of the activation terms (QuantizedActs::scales32_bm, sums32_bm).
// Q4_K and Q5_K values are u8 (tdpbsud); Q8_0 values and Q6_K values minus 32 are s8
// (tdpbssd; the VNNI tiles add -128 sum(a) or -32 sum(a) to reach the same integers).
// Cost per activation row and block of 32: the float steps (4-5 instructions) instead of
// 8 vpdpbusd plus those steps, the tile products beside them on the AMX unit. Every block's
// C tile goes through memory (tilestored, then 16 vector loads), and with two tile stages that
// round trip, not the float steps, sets the pace: on a 16-core Sapphire Rapids host
// (docs/BENCHMARKS.md section 20) the tiles were slower than the VNNI ones at M <= 17 and for
// Q6_K, and ahead at M >= 32 for Q8_0 and Q4_K; on a 2-core Emerald Rapids VM (section 36) a
// Q4_K_M prefill ran 1.09-1.37x as fast, a Q8_0 one 0.68-0.97x. Hence Q4_K and Q5_K by
// default, Q8_0 and Q6_K only under AmxUse::All (cpu.h), and only for calls of kAmxMinRows.
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 AVX-512 headers (bug 105593)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <type_traits>

#include "kernels/matmul_internal.h"
#include "kernels/matmul_kquant_blocks_avx512.h"
#include "kernels/matmul_tiles_avx512.h"
#include "kernels/quant_blocks.h"

namespace specdec::matmul_detail {

namespace {

constexpr int kTileRows = 16;     // activation rows per tile product
constexpr int kCBytes = 16 * 64;  // one stored C tile: (16 activation rows, 16 int32)

// The tile register file's shapes (ldtilecfg's 64-byte operand). Two stages, so that one block's
// product runs while the previous block's results are scaled: stage 0 uses tmm0 (A), tmm1 (B),
// tmm2 (C); stage 1 tmm3, tmm4, tmm5. k_bytes: values per product (32; Q6_K 16).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row of each tile register
  uint8_t rows[16] = {};
};

void configure_tiles(int k_bytes) {
  TileConfig c;
  for (int stage = 0; stage < 2; ++stage) {
    c.rows[3 * stage] = kTileRows, c.colsb[3 * stage] = static_cast<uint16_t>(k_bytes);   // A
    c.rows[3 * stage + 1] = static_cast<uint8_t>(k_bytes / 4), c.colsb[3 * stage + 1] = 64;  // B
    c.rows[3 * stage + 2] = kTileRows, c.colsb[3 * stage + 2] = 64;                         // C
  }
  // Not _tile_loadconfig: GCC 12 drops the stores to c before it as dead (only the palette byte
  // was written, and the first tileloadd raised #UD). The asm names all 64 bytes it reads.
  __asm__ volatile("ldtilecfg %0" : : "m"(c) : "memory");
}

// The tile instructions as asm (GCC's _tile_loadd names no memory, so stores to the B buffer
// could be moved past it). The asm names the memory it reads and writes as operands rather
// than clobbering all memory, so the accumulators stay in registers around it: the activation
// rows (any length from a: ReadAnything), the B operand (kBBytes at b) and the stored C tile.
struct ReadAnything {
  char bytes[1 << 28];
};
#define SPECDEC_AMX_PRODUCT(A, B, C, OP, a, a_stride, b, c)                                          \
  __asm__ volatile("tileloadd (%1,%2,1), %%tmm" #A "\n\t"                                           \
                   "tileloadd (%3,%4,1), %%tmm" #B "\n\t"                                           \
                   "tilezero %%tmm" #C "\n\t" OP " %%tmm" #B ", %%tmm" #A ", %%tmm" #C "\n\t"     \
                   "tilestored %%tmm" #C ", (%5,%4,1)"                                              \
                   : "=m"(*reinterpret_cast<int32_t(*)[kCBytes / 4]>(c))                            \
                   : "r"(a), "r"(static_cast<long>(a_stride)), "r"(b), "r"(64L), "r"(c),            \
                     "m"(*reinterpret_cast<const ReadAnything*>(a)),                                 \
                     "m"(*reinterpret_cast<const uint8_t(*)[kBBytes]>(b)))

// C (stored at c) = A (activation rows at a, a_stride apart) x B (kBBytes at b); stage 0 or 1.
template <bool kSignedB, int kBBytes>
inline void product(int stage, const int8_t* a, int64_t a_stride, const uint8_t* b, int32_t* c) {
  if (stage == 0) {
    if constexpr (kSignedB) SPECDEC_AMX_PRODUCT(0, 1, 2, "tdpbssd", a, a_stride, b, c);
    else SPECDEC_AMX_PRODUCT(0, 1, 2, "tdpbsud", a, a_stride, b, c);
  } else {
    if constexpr (kSignedB) SPECDEC_AMX_PRODUCT(3, 4, 5, "tdpbssd", a, a_stride, b, c);
    else SPECDEC_AMX_PRODUCT(3, 4, 5, "tdpbsud", a, a_stride, b, c);
  }
}
#undef SPECDEC_AMX_PRODUCT

// ---- Per type: how a block of 32 values is multiplied (kPerBlock products of 32 / kPerBlock
// values; signed or unsigned weights) and scaled. decode(t, step, fn) calls fn(block, v, w0, w1) for
// the blocks of one step of the tile (a super-block; Q8_0: one block), v[8] the values as the
// B operand wants them; step(acc, c0, c1, w, da, sum) is the VNNI tile's float step for one
// activation row and block: c0 (c1) the stored integer sums of its products, w the block's
// scale vectors, da and sum the row's d and sum(a) of the block.
struct Q8_0Kind {
  static constexpr int kPerBlock = 1, kBlocksPerStep = 1;
  static constexpr bool kSignedB = true;
  template <typename TileT, typename Fn>
  static void decode(const TileT& t, int64_t step, Fn&& fn) {
    const int64_t off = step * static_cast<int64_t>(sizeof(quant::BlockQ8_0));
    __m512i v[8];
    load_transposed32(t, off + 2, v);  // q as s8: the integers S = -128 sum(a) + sum((q + 128) a)
    fn(0, v, gather_half(t, off, 0), _mm512_setzero_ps());
  }
  static __m512 step(__m512 acc, const int32_t* c0, const int32_t*, const __m512* w, float da, float) {
    const __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c0)), _mm512_set1_ps(da));
    return _mm512_fmadd_ps(f, w[0], acc);
  }
};

template <bool kFiveBit>
struct Q45_KKind {
  static constexpr int kPerBlock = 1, kBlocksPerStep = 8;
  static constexpr bool kSignedB = false;
  template <typename TileT, typename Fn>
  static void decode(const TileT& t, int64_t step, Fn&& fn) {
    q45_k_sub_blocks<kFiveBit>(t, step, fn);  // fn(sub, v, ws, wm)
  }
  static __m512 step(__m512 acc, const int32_t* c0, const int32_t*, const __m512* w, float da, float sum) {
    const __m512 sdot = _mm512_cvtepi32_ps(_mm512_load_si512(c0));
    const __m512 f = _mm512_fmadd_ps(w[1], _mm512_set1_ps(sum), _mm512_mul_ps(sdot, w[0]));
    return _mm512_fmadd_ps(f, _mm512_set1_ps(da), acc);
  }
};

struct Q6_KKind {
  static constexpr int kPerBlock = 2, kBlocksPerStep = 8;
  static constexpr bool kSignedB = true;
  template <typename TileT, typename Fn>
  static void decode(const TileT& t, int64_t step, Fn&& fn) {
    const __m512i bias = _mm512_set1_epi8(32);
    q6_k_blocks(t, step, [&](int block, const __m512i* v, __m512 ws0, __m512 ws1) {
      __m512i q[8];  // q - 32 as s8: the integers the VNNI tile reaches with -32 sum(a)
      #pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) q[k] = _mm512_sub_epi8(v[k], bias);
      fn(block, q, ws0, ws1);
    });
  }
  static __m512 step(__m512 acc, const int32_t* c0, const int32_t* c1, const __m512* w, float da, float) {
    const __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c0)), w[0],
                                     _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c1)), w[1]));
    return _mm512_fmadd_ps(f, _mm512_set1_ps(da), acc);
  }
};

// One group of activation rows (kFull: 16, with the accumulators in registers; else G < 16
// rows, accumulators in memory) times n_blocks decoded blocks: the products of block i + 1 are
// issued (alternating the two stages) before block i's results are scaled, so the tile unit
// and the float steps overlap. a: the group's first activation row at the chunk's first block;
// da, sums: the block-major terms of the group's first row and the chunk's first block.
template <typename Kind, bool kFull>
inline void group_blocks(int n_blocks, int G, const int8_t* a, int64_t stride, const uint8_t* b_tiles, const __m512 (*w)[2],
                         const float* da, const float* sums, int64_t block_stride, int32_t* c_rows, __m512* acc) {
  constexpr int kABytes = 32 / Kind::kPerBlock, kBBytes = 8 * 64 / Kind::kPerBlock, kInts = kCBytes / 4;
  __m512 sum[kTileRows];
  if constexpr (kFull) {
    #pragma GCC unroll 16
    for (int r = 0; r < kTileRows; ++r) sum[r] = acc[r];
  }
  for (int i = 0; i <= n_blocks; ++i) {
    if (i < n_blocks) {
      #pragma GCC unroll 2
      for (int p = 0; p < Kind::kPerBlock; ++p) {
        const int j = i * Kind::kPerBlock + p;
        product<Kind::kSignedB, kBBytes>(j % 2, a + j * kABytes, stride, b_tiles + j * kBBytes,
                                         c_rows + kInts * ((i % 2) * Kind::kPerBlock + p));
      }
    }
    if (i == 0) continue;
    const int k = i - 1;
    const int32_t* c = c_rows + kInts * ((k % 2) * Kind::kPerBlock);
    const float* da_k = da + k * block_stride;
    const float* sum_k = sums + k * block_stride;
    if constexpr (kFull) {
      #pragma GCC unroll 16
      for (int r = 0; r < kTileRows; ++r) sum[r] = Kind::step(sum[r], c + 16 * r, c + kInts + 16 * r, w[k], da_k[r], sum_k[r]);
    } else {
      for (int r = 0; r < G; ++r) acc[r] = Kind::step(acc[r], c + 16 * r, c + kInts + 16 * r, w[k], da_k[r], sum_k[r]);
    }
  }
  if constexpr (kFull) {
    #pragma GCC unroll 16
    for (int r = 0; r < kTileRows; ++r) acc[r] = sum[r];
  }
}

// One weight tile (16 rows) times one row block: the tile's blocks decoded kChunkBlocks at a
// time into B operands and scale vectors, then each group of 16 activation rows runs the
// chunk's products (group_blocks).
constexpr int kChunkBlocks = 64;  // blocks of 32 values decoded per pass: 32 KiB of B operands

// The weights' prefetch: 4 KiB ahead into L1 (as the VNNI tiles' before BENCHMARKS 30). On the
// Emerald Rapids VM of BENCHMARKS 36 a 1B Q4_K_M prefill was the same within the noise with
// none or with 8 KiB into L2 (the VNNI multi-row tiles' distance): these products are
// compute-bound.
template <typename TileT>
[[gnu::always_inline]] inline void amx_prefetch(const TileT& t, int64_t step) {
  if constexpr (std::is_base_of_v<Tile16, TileT>) {
    prefetch_tile16_lines(t, step, kTile16PrefetchBytes, /*into_l1=*/true, 0, 1);
  } else {
    prefetch_next</*kIntoL1=*/true>(t, step);
  }
}

template <typename Kind, typename TileT>
void amx_tile(const TileT& t, int64_t n_steps, const RowBlock& rb, __m512* acc) {
  constexpr int kSteps = kChunkBlocks / Kind::kBlocksPerStep;  // steps per chunk
  alignas(64) uint8_t b_tiles[kChunkBlocks][8 * 64];           // (block, product, k, 64)
  alignas(64) int32_t c_rows[4 * kCBytes / 4];                 // (stage, product, row, weight row)
  __m512 w[kChunkBlocks][2];                                   // each block's two scale vectors
  const QuantizedActs& acts = *rb.acts;
  for (int64_t s0 = 0; s0 < n_steps; s0 += kSteps) {
    const int n_chunk_steps = static_cast<int>(n_steps - s0 < kSteps ? n_steps - s0 : kSteps);
    for (int i = 0; i < n_chunk_steps; ++i) {
      amx_prefetch(t, s0 + i);
      Kind::decode(t, s0 + i, [&](int block, const __m512i* v, __m512 w0, __m512 w1) {
        const int at = i * Kind::kBlocksPerStep + block;
        #pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) _mm512_store_si512(b_tiles[at] + 64 * k, v[k]);
        w[at][0] = w0;
        w[at][1] = w1;
      });
    }
    const int n_blocks = n_chunk_steps * Kind::kBlocksPerStep;
    const int64_t b0 = s0 * Kind::kBlocksPerStep;  // the chunk's first block of 32 in the row
    for (int g0 = 0; g0 < rb.R; g0 += kTileRows) {
      const int G = min_int(kTileRows, rb.R - g0);
      const int8_t* a = rb.values(g0) + 32 * b0;
      const int64_t bm = b0 * acts.block_stride + rb.r0 + g0;  // block-major index of (b0, first row)
      if (G == kTileRows) {
        group_blocks<Kind, true>(n_blocks, G, a, acts.row_stride, b_tiles[0], w, acts.scales32_bm + bm,
                                 acts.sums32_bm + bm, acts.block_stride, c_rows, acc + g0);
      } else {
        group_blocks<Kind, false>(n_blocks, G, a, acts.row_stride, b_tiles[0], w, acts.scales32_bm + bm,
                                  acts.sums32_bm + bm, acts.block_stride, c_rows, acc + g0);
      }
    }
  }
}

// Runs job on the AMX tiles; false (doing nothing) for a type or layout they do not cover, or
// that amx_use() leaves on the VNNI tiles (amx_takes).
bool amx_range(const RangeJob& job) {
  const WeightMatrix& w = *job.w;
  const int64_t n32 = w.n_in / 32, n256 = w.n_in / 256;
  if (!amx_takes(w.type, amx_use())) return false;
  if (w.layout == WeightLayout::Q8_0Tiles16) {
    if (w.type != DType::Q8_0) return false;
    configure_tiles(32);
    tiles16<Q8Tile16, false>(job, q8_tile_bytes(w.n_in), n32, SPECDEC_TILE(amx_tile<Q8_0Kind>));
    return true;
  }
  if (w.layout == WeightLayout::Chunks16Tiles16) {
    using Q4K = ChunkTile16<sizeof(quant::BlockQ4_K)>;
    using Q5K = ChunkTile16<sizeof(quant::BlockQ5_K)>;
    switch (w.type) {  // units: super-blocks of Q*K::kStride bytes
      case DType::Q4_K:
        configure_tiles(32);
        tiles16<Q4K, false>(job, n256 * Q4K::kStride, n256, SPECDEC_TILE(amx_tile<Q45_KKind<false>>));
        return true;
      case DType::Q5_K:
        configure_tiles(32);
        tiles16<Q5K, false>(job, n256 * Q5K::kStride, n256, SPECDEC_TILE(amx_tile<Q45_KKind<true>>));
        return true;
      default: return false;
    }
  }
  if (w.layout != WeightLayout::RowMajor) return false;
  switch (w.type) {
    case DType::Q8_0: configure_tiles(32); in_place_tiles<false>(job, n32, SPECDEC_TILE(amx_tile<Q8_0Kind>)); return true;
    case DType::Q4_K: configure_tiles(32); in_place_tiles<false>(job, n256, SPECDEC_TILE(amx_tile<Q45_KKind<false>>)); return true;
    case DType::Q5_K: configure_tiles(32); in_place_tiles<false>(job, n256, SPECDEC_TILE(amx_tile<Q45_KKind<true>>)); return true;
    case DType::Q6_K: configure_tiles(16); in_place_tiles<false>(job, n256, SPECDEC_TILE(amx_tile<Q6_KKind>)); return true;
    default: return false;
  }
}

}  // namespace

void matmul_range_amx(const RangeJob& job) {
  // Without the block-major terms (activations prepared for another path) the VNNI tiles give
  // the same bits.
  if (job.acts.scales32_bm == nullptr || !amx_range(job)) {
    matmul_range_avx512(job);
    return;
  }
  __asm__ volatile("tilerelease" : : : "memory");  // back to the initial state: no tile data to save at a context switch
}

}  // namespace specdec::matmul_detail
