// AVX2 (+FMA, F16C) path of matmul. Compiled with the AVX2 flags; reached only through
// vector_isa(active_isa()) == Isa::Avx2. Only raw pointers cross this file's boundary.
//
// Per-row operation order (fixed for every M, tile position and thread count):
//  - float weights: one accumulator of 8 lanes, acc = fma(w, x, acc) per 8 values in order,
//    a zero-padded tail last; y = hsum(acc). Tiles of W weight rows x R activation rows, the
//    shape picked by M (float_range), over row-major rows or the FloatRows8 layout (the same
//    bits).
//  - every quantized type: the in-place tiles of matmul_tiles_avx2.cpp (their own order); a
//    repacked Q8_0 matrix: matmul_repacked_avx2.cpp; a repacked legacy one:
//    matmul_repacked_legacy_avx2.cpp; a repacked Q6_K one (Q6KTiles8):
//    matmul_repacked_q6k_avx2.cpp; a repacked Q2_K-Q5_K one: the in-place tiles over the
//    stored chunks (the same order and bits in every case).
#include <immintrin.h>

#include <cstring>

#include "kernels/matmul_internal.h"

namespace specdec::matmul_detail {

namespace {

// Local helper: no std:: templates in wide-ISA files (their weak copies could be picked by the linker).
inline int min_rows(int a, int b) { return a < b ? a : b; }
template <int N>
struct IntTag {
  static constexpr int value = N;
};

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <DType T>
inline __m256 load_w(const uint8_t* row) {
  if constexpr (T == DType::F32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row));
  } else if constexpr (T == DType::F16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row)));
  } else {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
}

template <DType T>
constexpr int64_t weight_bytes() { return T == DType::F32 ? 4 : 2; }

// y[r][o + k] for rows r < R of x and weight rows k < W (x and y point at the tile's first row
// and output; rows[k] at row k's first chunk of 16 values, its chunks `step` bytes apart:
// float_chunk_step). One accumulator per (row, output): acc = fma(w[i..i+8), x[i..i+8), acc)
// for i = 0, 8, ..., a zero-padded tail last (row-major rows only: FloatRows8 has none); y =
// hsum(acc). The same for every W, R and layout.
template <DType T, int W, int R>
void float_tile(const uint8_t* const* rows, int64_t step, const float* x, int64_t n_in, float* y, int64_t n_out,
                RowPrefetch pf = {}) {
  constexpr int64_t wb = weight_bytes<T>();
  __m256 acc[W][R];
#pragma GCC unroll 8
  for (int k = 0; k < W; ++k)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[k][r] = _mm256_setzero_ps();
  // The 8 values from i (a multiple of 8) of every row: rows[k] + off, x + i.
  auto step8 = [&](int64_t i, int64_t off) __attribute__((always_inline)) {
    if constexpr (W * R + W + 1 > 16) {  // W weight vectors do not fit beside the sums: the R x first
      __m256 xv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xv[r] = _mm256_loadu_ps(x + r * n_in + i);
#pragma GCC unroll 8
      for (int k = 0; k < W; ++k) {
        const __m256 wv = load_w<T>(rows[k] + off);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[k][r] = _mm256_fmadd_ps(wv, xv[r], acc[k][r]);
      }
    } else {
      __m256 wv[W];
#pragma GCC unroll 8
      for (int k = 0; k < W; ++k) wv[k] = load_w<T>(rows[k] + off);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256 xv = _mm256_loadu_ps(x + r * n_in + i);
#pragma GCC unroll 8
        for (int k = 0; k < W; ++k) acc[k][r] = _mm256_fmadd_ps(wv[k], xv, acc[k][r]);
      }
    }
  };
  // A chunk (kFloatChunkValues values) per iteration, as the AVX-512 tile's: its offset, its
  // prefetch tests and the loop once, then its two 8-value steps. With one step per iteration
  // those took as many instructions as a 4 x 3 tile's 12 FMAs (63 per step), and a Zen 3 F16
  // tile ran at ~36% of the FMA peak (BENCHMARKS 37a). The steps, in the same order: the same bits.
  static_assert(kFloatChunkValues == 16);
  int64_t i = 0, chunk = 0;  // chunk: the offset of value i's chunk in each row
  for (; i + kFloatChunkValues <= n_in; i += kFloatChunkValues, chunk += step) {
    if (((i * wb) & 63) == 0) prefetch_rows<W>(pf, rows, i * wb);  // every 64 bytes of a row-major row
    prefetch_chunks<W, 16 * wb>(pf, rows, chunk);
    step8(i, chunk);
    step8(i + 8, chunk + 8 * wb);
  }
  if (i + 8 <= n_in) {  // row-major rows only: n_in % 16 >= 8 (FloatRows8 has n_in % 16 == 0)
    if (((i * wb) & 63) == 0) prefetch_rows<W>(pf, rows, i * wb);
    step8(i, chunk);
    i += 8;
  }
  if (i < n_in) {
    const int64_t n_tail = n_in - i;
    __m256 wv[W];
    for (int k = 0; k < W; ++k) {
      alignas(32) uint8_t wtail[32] = {};
      std::memcpy(wtail, rows[k] + chunk + (i % kFloatChunkValues) * wb, static_cast<size_t>(n_tail * wb));
      wv[k] = load_w<T>(wtail);
    }
    for (int r = 0; r < R; ++r) {
      alignas(32) float xtail[8] = {};
      std::memcpy(xtail, x + r * n_in + i, static_cast<size_t>(n_tail) * sizeof(float));
      const __m256 xv = _mm256_load_ps(xtail);
      for (int k = 0; k < W; ++k) acc[k][r] = _mm256_fmadd_ps(wv[k], xv, acc[k][r]);
    }
  }
#pragma GCC unroll 8
  for (int k = 0; k < W; ++k)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) y[r * n_out + k] = hsum(acc[k][r]);
}

// pf: the group's row streams, prefetched during the first row block (later blocks find the
// group's rows in the caches).
template <DType T, int W, int RMAX>
void float_tiles(const uint8_t* const* rows, int64_t step, const RangeJob& job, int64_t o, RowPrefetch pf = {}) {
  const WeightMatrix& w = *job.w;
  for (int r0 = 0; r0 < job.M; r0 += RMAX) {
    const float* x = job.x + r0 * w.n_in;
    float* y = job.y + r0 * w.n_out + o;
    const RowPrefetch a = r0 == 0 ? pf : RowPrefetch{};
    switch (min_rows(RMAX, job.M - r0)) {
      case 1: float_tile<T, W, 1>(rows, step, x, w.n_in, y, w.n_out, a); break;
      case 2: float_tile<T, W, (RMAX >= 2 ? 2 : 1)>(rows, step, x, w.n_in, y, w.n_out, a); break;
      case 3: float_tile<T, W, (RMAX >= 3 ? 3 : 1)>(rows, step, x, w.n_in, y, w.n_out, a); break;
      default: float_tile<T, W, RMAX>(rows, step, x, w.n_in, y, w.n_out, a); break;
    }
  }
}

// Weight rows in groups of W (the rest one by one), each group applied to all M rows in tiles
// of up to RMAX rows: each weight vector is loaded once per tile, the groups once per job.
// Row-major rows are prefetched (row_prefetch); FloatRows8 groups, one sequential stream each,
// when several activation rows slow the tile down or the decode prefetch is Deep
// (rows8_prefetch).
template <DType T, int W, int RMAX>
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
    float_tiles<T, W, RMAX>(rows, step, job, o, prefetch(W));
  }
  for (; o < job.o_end; ++o) {
    const uint8_t* row = float_row_start(w, o);
    float_tiles<T, 1, RMAX>(&row, step, job, o, prefetch(1));
  }
}

// ---- Blocked float products (matmul_internal.h: FloatBlockScratch), as matmul_avx512.cpp's:
// float_tile's operations for values [i0, i1) (i0 a multiple of 16) of the tile's rows, the
// accumulators starting at zero (i0 = 0) or where the previous block left them in acc (8 floats
// per output, kFloatBlockAccStride floats per row), stored back there or summed into y at the
// row's end (i1 = n_in). x: the tile's first row of the scratch copy (x_stride floats per row),
// value i0 first. The R x
// vectors are loaded first: 4 x 3 tiles, 12 sums + 3 + 1 weight in the 16 registers.
template <DType T, int W, int R, bool kPrefetch = false>
void float_block_tile(const uint8_t* const* rows, int64_t step, const float* x, int64_t x_stride, int64_t i0, int64_t i1, int64_t n_in,
                      float* acc_rows, float* y, int64_t n_out, const uint8_t* const* next = nullptr,
                      int64_t next_at = 0) {
  constexpr int64_t wb = weight_bytes<T>();
  __m256 acc[W][R];
#pragma GCC unroll 8
  for (int k = 0; k < W; ++k)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      acc[k][r] = i0 == 0 ? _mm256_setzero_ps() : _mm256_loadu_ps(acc_rows + r * kFloatBlockAccStride + 8 * k);
  int64_t chunk = (i0 / kFloatChunkValues) * step;
  for (int64_t i = 0; i < i1 - i0; i += kFloatChunkValues, chunk += step, next_at += step) {
    if constexpr (kPrefetch) {
#pragma GCC unroll 8
      for (int k = 0; k < W; ++k) _mm_prefetch(reinterpret_cast<const char*>(next[k] + next_at), _MM_HINT_T1);
    }
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
      __m256 xv[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xv[r] = _mm256_load_ps(x + r * x_stride + i + 8 * half);
#pragma GCC unroll 8
      for (int k = 0; k < W; ++k) {
        const __m256 wv = load_w<T>(rows[k] + chunk + 8 * half * wb);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[k][r] = _mm256_fmadd_ps(wv, xv[r], acc[k][r]);
      }
    }
  }
#pragma GCC unroll 8
  for (int k = 0; k < W; ++k)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      if (i1 == n_in) {
        y[r * n_out + k] = hsum(acc[k][r]);
      } else {
        _mm256_storeu_ps(acc_rows + r * kFloatBlockAccStride + 8 * k, acc[k][r]);
      }
    }
}

// Outputs in blocks of kFloatBlockWeights, inputs in blocks of kFloatBlockValues, as
// matmul_avx512.cpp's float_range_blocked (4 x 3 tiles here). Needs n_in a multiple of 16.
template <DType T>
void float_range_blocked(const RangeJob& job) {
  const WeightMatrix& w = *job.w;
  const int64_t step = float_chunk_step(w), n_in = w.n_in, n_out = w.n_out;
  constexpr int W = 4, R = 3;
  const int64_t xs = job.float_blocks.x_stride;
  for (int64_t o0 = job.o_begin; o0 < job.o_end; o0 += kFloatBlockWeights) {
    const int64_t o1 = o0 + kFloatBlockWeights < job.o_end ? o0 + kFloatBlockWeights : job.o_end;
    for (int64_t i0 = 0; i0 < n_in; i0 += kFloatBlockValues) {
      const int64_t i1 = i0 + kFloatBlockValues < n_in ? i0 + kFloatBlockValues : n_in;
      for (int r0 = 0; r0 < job.M; r0 += R) {
        const float* x = job.float_blocks.x + r0 * xs + i0;
        float* acc = job.float_blocks.acc + r0 * kFloatBlockAccStride;
        float* y = job.y + r0 * n_out;
        const int n_rows = min_rows(R, job.M - r0);
        // The first pass prefetches the next block's weights into L2 (as matmul_avx512.cpp's).
        const int64_t next_at = i1 < n_in ? (i1 / kFloatChunkValues) * step : 0;
        auto tiles = [&](auto w_tag, const uint8_t* const* rows, int64_t o, const uint8_t* const* next) {
          constexpr int kW = decltype(w_tag)::value;
          float* a = acc + (o - o0) * 8;
          if (next != nullptr && n_rows == R)
            return float_block_tile<T, kW, R, true>(rows, step, x, xs, i0, i1, n_in, a, y + o, n_out, next, next_at);
          switch (n_rows) {
            case 1: float_block_tile<T, kW, 1>(rows, step, x, xs, i0, i1, n_in, a, y + o, n_out); break;
            case 2: float_block_tile<T, kW, 2>(rows, step, x, xs, i0, i1, n_in, a, y + o, n_out); break;
            default: float_block_tile<T, kW, R>(rows, step, x, xs, i0, i1, n_in, a, y + o, n_out); break;
          }
        };
        const int64_t next_o = i1 < n_in ? 0 : kFloatBlockWeights;
        int64_t o = o0;
        for (; o + W <= o1; o += W) {
          const uint8_t* rows[W];
          const uint8_t* next[W];
          const bool pf = r0 == 0 && o + next_o + W <= job.o_end;
          for (int k = 0; k < W; ++k) {
            rows[k] = float_row_start(w, o + k);
            next[k] = pf ? float_row_start(w, o + next_o + k) : nullptr;
          }
          tiles(IntTag<W>{}, rows, o, pf ? next : nullptr);
        }
        for (; o < o1; ++o) {
          const uint8_t* row = float_row_start(w, o);
          tiles(IntTag<1>{}, &row, o, nullptr);
        }
      }
    }
  }
}

// Every output keeps one accumulator fed in the same order whatever the tile shape (batch
// invariance: the shape only changes which outputs are computed side by side), so the shape
// is chosen for speed alone. An FMA chain waits ~4 cycles per step: a tile needs ~8 independent
// (weight row, activation row) chains to keep both FMA pipes busy, and 16 ymm registers bound
// it (W x R accumulators + W converted weights + 1 activation). The former 2 x R tiles left an
// M = 1 product 2 chains and M = 5's last row 2: half speed (docs/BENCHMARKS.md section 13).
// A FloatRows8 matrix takes 4 x 3 tiles from M = 3 on (12 chains; the 3 activation vectors
// loaded first, so that 12 sums + 3 + 1 weight fill the 16 registers): 4-row tiles keep to
// the 8-row groups, where 3-row ones straddle them, and a 1B F16 t(5) took 0.88x the time of
// the row-major 3 x 3 tiles', 1.05x with 3 x 3 tiles over the groups (BENCHMARKS 35a).
template <DType T>
void float_range(const RangeJob& job) {
  if (job.float_blocks.acc != nullptr && job.w->n_in % kFloatChunkValues == 0) return float_range_blocked<T>(job);
  if (job.M > 2 && job.w->layout == WeightLayout::FloatRows8) return float_range_w<T, 4, 3>(job);  // 12
  switch (job.M) {
    case 1: return float_range_w<T, 8, 1>(job);  // 8 chains
    case 2: return float_range_w<T, 4, 2>(job);  // 8
    case 4: return float_range_w<T, 3, 4>(job);  // 12
    default: return float_range_w<T, 3, 3>(job);  // 9 per full tile; M = 5: 9 + 6
  }
}

// One build of the quantized kernels (Avx2Products, matmul_internal.h).
struct QuantKernels {
  bool (*tiled)(const RangeJob&);
  void (*repacked_q8_0)(const RangeJob&);
  void (*repacked_legacy)(const RangeJob&);
  void (*repacked_q6_k)(const RangeJob&);
};
#define SPECDEC_QUANT_KERNELS(suffix)                                                                   \
  QuantKernels{matmul_range_tiled_avx2##suffix, matmul_range_repacked_avx2##suffix,                    \
               matmul_range_repacked_legacy_avx2##suffix, matmul_range_repacked_q6k_avx2##suffix}
const QuantKernels kQuantKernels[] = {SPECDEC_QUANT_KERNELS(), SPECDEC_QUANT_KERNELS(_avxvnni),
                                      SPECDEC_QUANT_KERNELS(_evexvnni)};  // by Avx2Products
#undef SPECDEC_QUANT_KERNELS

}  // namespace

void matmul_range_avx2(const RangeJob& job) {
  const QuantKernels& quant = kQuantKernels[static_cast<int>(job.avx2_products)];
  if (job.w->layout == WeightLayout::Q8_0Tiles8) return quant.repacked_q8_0(job);
  if (job.w->layout == WeightLayout::Blocks32PairTiles8) return quant.repacked_legacy(job);
  if (job.w->layout == WeightLayout::Q6KTiles8) return quant.repacked_q6_k(job);
  switch (job.w->type) {
    case DType::F32: float_range<DType::F32>(job); break;
    case DType::F16: float_range<DType::F16>(job); break;
    case DType::BF16: float_range<DType::BF16>(job); break;
    default:
      // every quantized type: weights read in place; a type without a tile would take the
      // scalar path (correct, slow: none today)
      if (!quant.tiled(job)) matmul_range_scalar(job);
      break;
  }
}

}  // namespace specdec::matmul_detail
