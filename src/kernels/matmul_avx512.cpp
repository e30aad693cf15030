// AVX-512 (F, BW, VL, VNNI) path of matmul. Compiled with the AVX-512 flags; reached only
// through active_isa() == Isa::Avx512. Only raw pointers cross this file's boundary.
//
// Per-row operation order (fixed for every M, tile position and thread count):
//  - float weights: one accumulator of 16 lanes, acc = fma(w, x, acc) per 16 values in order,
//    the masked tail last; y = hsum(acc). Tiles of 4 weight rows x 6 activation rows (8 x 1
//    when M = 1), over row-major rows or the FloatRows8 layout (the same bits); from
//    kFloatBlockedMinRowsAvx512 rows on, in blocks of outputs and inputs (float_range_blocked).
//  - quantized weights: the tiled kernels' order (matmul_tiles_avx512.cpp and
//    matmul_tiles_small_avx512.cpp, every quantized type; the same bits as the AVX2 path).
// GCC 12's AVX-512 headers build results from _mm512_undefined_*() and trip -Wuninitialized at
// -O2 (GCC bug 105593, fixed in GCC 13); the warnings are about the headers, not this code.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/matmul_internal.h"

namespace specdec::matmul_detail {

namespace {

// Local helper: no std:: templates in wide-ISA files (their weak copies could be picked by the linker).
inline int min_rows(int a, int b) { return a < b ? a : b; }

constexpr int kFloatTileRows = 6;      // activation rows per float tile
constexpr int kFloatTileWeights = 4;   // weight rows per float tile
constexpr int kFloatTileWeightsOneRow = 8;  // M = 1: 8 chains (17 of the 32 zmm registers)

// Horizontal sum in a fixed order (own code: GCC 12's _mm512_reduce_add_ps warns).
inline float hsum(__m512 v) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 16 weights at p (a row's chunk), widened to f32.
template <DType T>
inline __m512 load_w(const uint8_t* p) {
  if constexpr (T == DType::F32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(p));
  } else if constexpr (T == DType::F16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  } else {
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
  }
}

// The first weights of the 16 at p selected by m (a row's tail), the rest zero.
template <DType T>
inline __m512 load_w_masked(const uint8_t* p, __mmask16 m) {
  if constexpr (T == DType::F32) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(p));
  } else if constexpr (T == DType::F16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  } else {
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
  }
}

// y[r][o + k] for rows r < R of x and weight rows k < W (x and y point at the tile's first row
// and output; rows[k] at row k's first chunk of 16 values, its chunks `step` bytes apart:
// float_chunk_step). One accumulator per (row, output): acc = fma(w[i..i+16), x[i..i+16), acc)
// for i = 0, 16, ..., the masked tail last (row-major rows only: FloatRows8 has none); y =
// hsum(acc). The same for every W, R and layout.
template <DType T, int W, int R>
void float_tile(const uint8_t* const* rows, int64_t step, const float* x, int64_t n_in, float* y, int64_t n_out,
                RowPrefetch pf = {}) {
  __m512 acc[W][R];
#pragma GCC unroll 8
  for (int k = 0; k < W; ++k)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[k][r] = _mm512_setzero_ps();
  int64_t i = 0, at = 0;  // at: bytes from a row's start to its chunk of value i
  constexpr int64_t wb = T == DType::F32 ? 4 : 2;  // bytes per weight
  for (; i + 16 <= n_in; i += 16, at += step) {
    if (((i * wb) & 63) == 0) prefetch_rows<W>(pf, rows, i * wb);
    prefetch_chunks<W, 16 * wb>(pf, rows, at);
    __m512 wv[W];
#pragma GCC unroll 8
    for (int k = 0; k < W; ++k) wv[k] = load_w<T>(rows[k] + at);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_loadu_ps(x + r * n_in + i);
#pragma GCC unroll 8
      for (int k = 0; k < W; ++k) acc[k][r] = _mm512_fmadd_ps(wv[k], xv, acc[k][r]);
    }
  }
  if (i < n_in) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n_in - i)) - 1u);
    __m512 wv[W];
#pragma GCC unroll 8
    for (int k = 0; k < W; ++k) wv[k] = load_w_masked<T>(rows[k] + at, m);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + r * n_in + i);
#pragma GCC unroll 8
      for (int k = 0; k < W; ++k) acc[k][r] = _mm512_fmadd_ps(wv[k], xv, acc[k][r]);
    }
  }
#pragma GCC unroll 8
  for (int k = 0; k < W; ++k)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) y[r * n_out + k] = hsum(acc[k][r]);
}

// pf: the group's row streams, prefetched during the first row block (later blocks find the
// group's rows in the caches).
template <DType T, int W>
void float_tiles(const uint8_t* const* rows, int64_t step, const RangeJob& job, int64_t o, RowPrefetch pf = {}) {
  const WeightMatrix& w = *job.w;
  for (int r0 = 0; r0 < job.M; r0 += kFloatTileRows) {
    const float* x = job.x + r0 * w.n_in;
    float* y = job.y + r0 * w.n_out + o;
    const RowPrefetch a = r0 == 0 ? pf : RowPrefetch{};
    switch (min_rows(kFloatTileRows, job.M - r0)) {
      case 1: float_tile<T, W, 1>(rows, step, x, w.n_in, y, w.n_out, a); break;
      case 2: float_tile<T, W, 2>(rows, step, x, w.n_in, y, w.n_out, a); break;
      case 3: float_tile<T, W, 3>(rows, step, x, w.n_in, y, w.n_out, a); break;
      case 4: float_tile<T, W, 4>(rows, step, x, w.n_in, y, w.n_out, a); break;
      case 5: float_tile<T, W, 5>(rows, step, x, w.n_in, y, w.n_out, a); break;
      default: float_tile<T, W, 6>(rows, step, x, w.n_in, y, w.n_out, a); break;
    }
  }
}

// Weight rows in groups of W (the rest one by one), each group applied to all M rows in tiles
// of up to kFloatTileRows while it is in L1. Row-major rows are prefetched (row_prefetch);
// FloatRows8 groups, one sequential stream each, when several activation rows slow the tile
// down or the decode prefetch is Deep (rows8_prefetch).
template <DType T, int W>
void float_range_w(const RangeJob& job) {
  const WeightMatrix& w = *job.w;
  const int64_t step = float_chunk_step(w);
  const bool row_major = w.layout == WeightLayout::RowMajor;
  auto prefetch = [&](int64_t n_rows) {
    return row_major ? row_prefetch(n_rows, static_cast<int64_t>(w.row_bytes), job.M) : rows8_prefetch(step, job.M, job.decode_prefetch);
  };
  if (!row_major) prefetch_rows8_start(w, job.o_begin, job.o_end, rows8_prefetch(step, job.M, job.decode_prefetch));
  int64_t o = job.o_begin;
  for (; o + W <= job.o_end; o += W) {
    const uint8_t* rows[W];
    for (int k = 0; k < W; ++k) rows[k] = float_row_start(w, o + k);
    float_tiles<T, W>(rows, step, job, o, prefetch(W));
  }
  for (; o < job.o_end; ++o) {
    const uint8_t* row = float_row_start(w, o);
    float_tiles<T, 1>(&row, step, job, o, prefetch(1));
  }
}

// ---- Blocked float products (matmul_internal.h: FloatBlockScratch). float_tile's operations
// for values [i0, i1) of the tile's rows: the accumulators start at zero (i0 = 0) or where the
// previous block left them in acc (a row's accumulators 16 floats per output, kFloatBlockAccStride
// floats per row), and are stored back there, or summed into y at the row's end (i1 = n_in).
// x: the tile's first row of the scratch copy, x_stride floats per row, value i0 first.
template <DType T, int W, int R, bool kPrefetch = false>
void float_block_tile(const uint8_t* const* rows, int64_t step, const float* x, int64_t x_stride, int64_t i0, int64_t i1, int64_t n_in,
                      float* acc_rows, float* y, int64_t n_out, const uint8_t* const* next = nullptr,
                      int64_t next_at = 0) {
  __m512 acc[W][R];
#pragma GCC unroll 8
  for (int k = 0; k < W; ++k)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      acc[k][r] = i0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(acc_rows + r * kFloatBlockAccStride + 16 * k);
  int64_t at = (i0 / 16) * step;
  for (int64_t i = 0; i < i1 - i0; i += 16, at += step, next_at += step) {
    __m512 wv[W];
    if constexpr (kPrefetch) {
#pragma GCC unroll 8
      for (int k = 0; k < W; ++k) _mm_prefetch(reinterpret_cast<const char*>(next[k] + next_at), _MM_HINT_T1);
    }
#pragma GCC unroll 8
    for (int k = 0; k < W; ++k) wv[k] = load_w<T>(rows[k] + at);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_load_ps(x + r * x_stride + i);
#pragma GCC unroll 8
      for (int k = 0; k < W; ++k) acc[k][r] = _mm512_fmadd_ps(wv[k], xv, acc[k][r]);
    }
  }
#pragma GCC unroll 8
  for (int k = 0; k < W; ++k)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      if (i1 == n_in) {
        y[r * n_out + k] = hsum(acc[k][r]);
      } else {
        _mm512_storeu_ps(acc_rows + r * kFloatBlockAccStride + 16 * k, acc[k][r]);
      }
    }
}

template <DType T, int W>
void float_block_tiles(int n_rows, const uint8_t* const* rows, int64_t step, const float* x, int64_t x_stride, int64_t i0, int64_t i1,
                       int64_t n_in, float* acc_rows, float* y, int64_t n_out, const uint8_t* const* next = nullptr,
                       int64_t next_at = 0) {
  if (next != nullptr) {
    if (n_rows >= kFloatTileRows)
      return float_block_tile<T, W, kFloatTileRows, true>(rows, step, x, x_stride, i0, i1, n_in, acc_rows, y, n_out, next, next_at);
  }
  switch (n_rows) {
    case 1: float_block_tile<T, W, 1>(rows, step, x, x_stride, i0, i1, n_in, acc_rows, y, n_out); break;
    case 2: float_block_tile<T, W, 2>(rows, step, x, x_stride, i0, i1, n_in, acc_rows, y, n_out); break;
    case 3: float_block_tile<T, W, 3>(rows, step, x, x_stride, i0, i1, n_in, acc_rows, y, n_out); break;
    case 4: float_block_tile<T, W, 4>(rows, step, x, x_stride, i0, i1, n_in, acc_rows, y, n_out); break;
    case 5: float_block_tile<T, W, 5>(rows, step, x, x_stride, i0, i1, n_in, acc_rows, y, n_out); break;
    default: float_block_tile<T, W, 6>(rows, step, x, x_stride, i0, i1, n_in, acc_rows, y, n_out); break;
  }
}

// Outputs in blocks of kFloatBlockWeights, inputs in blocks of kFloatBlockValues; per (output
// block, input block): 6-row tiles x 4-weight-row groups (the rest one by one) as float_tiles,
// reading the rows' values from the scratch copy. Needs n_in
// a multiple of 16 (no masked tail). Weights come from memory once per block and from L2 for the
// other M / 6 - 1 tiles. The first 6-row pass over a block prefetches (T1) the next block's
// weights for the same 4-row groups, one line per row and 16 values: without it that pass waited
// for memory, and a 1B F16 prefill in chunks of 64 took 1.09x as long (BENCHMARKS 43). A
// prefetch past the matrix's last block is not issued; one past a short last input block reads
// lines of the next rows (prefetches never fault).
template <DType T>
void float_range_blocked(const RangeJob& job) {
  const WeightMatrix& w = *job.w;
  const int64_t step = float_chunk_step(w), n_in = w.n_in, n_out = w.n_out;
  constexpr int W = kFloatTileWeights;
  const int64_t xs = job.float_blocks.x_stride;
  for (int64_t o0 = job.o_begin; o0 < job.o_end; o0 += kFloatBlockWeights) {
    const int64_t o1 = o0 + kFloatBlockWeights < job.o_end ? o0 + kFloatBlockWeights : job.o_end;
    for (int64_t i0 = 0; i0 < n_in; i0 += kFloatBlockValues) {
      const int64_t i1 = i0 + kFloatBlockValues < n_in ? i0 + kFloatBlockValues : n_in;
      for (int r0 = 0; r0 < job.M; r0 += kFloatTileRows) {
        const int n_rows = min_rows(kFloatTileRows, job.M - r0);
        const float* x = job.float_blocks.x + r0 * xs + i0;
        float* acc = job.float_blocks.acc + r0 * kFloatBlockAccStride;
        float* y = job.y + r0 * n_out;
        // The first pass prefetches into L2 the next block's weights: the same rows' next input
        // block, else the next output block's first (its rows 64 further on, where they exist).
        const bool pf = r0 == 0;
        const int64_t next_at = i1 < n_in ? (i1 / 16) * step : 0, next_o = i1 < n_in ? 0 : kFloatBlockWeights;
        int64_t o = o0;
        for (; o + W <= o1; o += W) {
          const uint8_t* rows[W];
          const uint8_t* next[W];
          for (int k = 0; k < W; ++k) rows[k] = float_row_start(w, o + k);
          const bool pf_here = pf && o + next_o + W <= job.o_end;
          for (int k = 0; k < W; ++k) next[k] = pf_here ? float_row_start(w, o + next_o + k) : nullptr;
          float_block_tiles<T, W>(n_rows, rows, step, x, xs, i0, i1, n_in, acc + (o - o0) * 16, y + o, n_out,
                                  pf_here ? next : nullptr, next_at);
        }
        for (; o < o1; ++o) {
          const uint8_t* row = float_row_start(w, o);
          float_block_tiles<T, 1>(n_rows, &row, step, x, xs, i0, i1, n_in, acc + (o - o0) * 16, y + o, n_out);
        }
      }
    }
  }
}

// The tile shape only sets how many independent FMA chains (one accumulator per output, fed in
// the same order whatever the shape: batch invariance) hide the FMA latency: M = 1 takes 8
// weight rows (8 chains; 4 x 1 left half the FMA throughput idle, as on AVX2: BENCHMARKS 13).
template <DType T>
void float_range(const RangeJob& job) {
  if (job.float_blocks.acc != nullptr && job.w->n_in % 16 == 0) {
    float_range_blocked<T>(job);
  } else if (job.M == 1) {
    float_range_w<T, kFloatTileWeightsOneRow>(job);
  } else {
    float_range_w<T, kFloatTileWeights>(job);
  }
}

// Quantized weights: every type on the AVX-512 tiles (16 weight rows per tile); the AVX2 tiles
// (8 rows per tile) only for a type without one. Both read the blocks in place or,
// for a matrix repacked at load (Q8_0, Q4_K, Q5_K, Q6_K), the stored transposed 8-row tiles
// (two per AVX-512 tile), and compute the same formulas, so every quantized type gives the
// AVX2 path's bits here. (An
// unpacked-row VNNI path for the other types was 1.3-2.1x slower at M = 1 and slower at every M
// measured on a 16-core Sapphire Rapids: docs/BENCHMARKS.md section 15.)
void quant_range(const RangeJob& job) {
  if (matmul_range_tiled_avx512(job)) return;
  if (!matmul_range_tiled_avx2(job)) matmul_range_scalar(job);  // no type left: a future type's fallback
}

}  // namespace

void matmul_range_avx512(const RangeJob& job) {
  switch (job.w->type) {
    case DType::F32: float_range<DType::F32>(job); break;
    case DType::F16: float_range<DType::F16>(job); break;
    case DType::BF16: float_range<DType::BF16>(job); break;
    default: quant_range(job); break;
  }
}

}  // namespace specdec::matmul_detail
