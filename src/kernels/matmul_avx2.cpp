// AVX2 (+FMA, F16C) path of matmul. Compiled with the AVX2 flags; reached only through
// active_isa() == Isa::Avx2. Only raw pointers cross this file's boundary.
//
// Per-row operation order (fixed for every M, tile position and thread count):
//  - float weights: one accumulator of 8 lanes, acc = fma(w, x, acc) per 8 values in order,
//    a zero-padded tail last; y = hsum(acc). Tiles of 2 weight rows x 4 activation rows.
//  - Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K: the in-place tiles of matmul_tiles_avx2.cpp (their own order).
//  - other quantized weights: per 32 values, dp = madd16(maddubs(|q|, sign(a, q)), 1) (exact int32 per
//    group of 4), acc = fma(float(dp) * d, scale, acc); for types with an additive term,
//    c = sum over groups of 16 of min16 * s16; y = hsum(acc) + hsum(c).
#include <immintrin.h>

#include <cstring>

#include "kernels/matmul_internal.h"

namespace specdec::matmul_detail {

namespace {

// Local helper: no std:: templates in wide-ISA files (their weak copies could be picked by the linker).
inline int min_rows(int a, int b) { return a < b ? a : b; }

constexpr int kTileRows = 4;           // activation rows per tile
constexpr int kFloatTileWeights = 2;   // weight rows per float tile

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
// and output). One accumulator per (row, output): acc = fma(w[i..i+8), x[i..i+8), acc) for
// i = 0, 8, ..., a zero-padded tail last; y = hsum(acc). The same for every W and R.
template <DType T, int W, int R>
void float_tile(const uint8_t* const* rows, const float* x, int64_t n_in, float* y, int64_t n_out) {
  constexpr int64_t wb = weight_bytes<T>();
  __m256 acc[W][R];
#pragma GCC unroll 8
  for (int k = 0; k < W; ++k)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[k][r] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n_in; i += 8) {
    __m256 wv[W];
#pragma GCC unroll 8
    for (int k = 0; k < W; ++k) wv[k] = load_w<T>(rows[k] + i * wb);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_loadu_ps(x + r * n_in + i);
#pragma GCC unroll 8
      for (int k = 0; k < W; ++k) acc[k][r] = _mm256_fmadd_ps(wv[k], xv, acc[k][r]);
    }
  }
  if (i < n_in) {
    const int64_t n_tail = n_in - i;
    __m256 wv[W];
    for (int k = 0; k < W; ++k) {
      alignas(32) uint8_t wtail[32] = {};
      std::memcpy(wtail, rows[k] + i * wb, static_cast<size_t>(n_tail * wb));
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

template <DType T, int W>
void float_tiles(const uint8_t* const* rows, const RangeJob& job, int64_t o) {
  const WeightMatrix& w = *job.w;
  for (int r0 = 0; r0 < job.M; r0 += kTileRows) {
    const float* x = job.x + r0 * w.n_in;
    float* y = job.y + r0 * w.n_out + o;
    switch (min_rows(kTileRows, job.M - r0)) {
      case 1: float_tile<T, W, 1>(rows, x, w.n_in, y, w.n_out); break;
      case 2: float_tile<T, W, 2>(rows, x, w.n_in, y, w.n_out); break;
      case 3: float_tile<T, W, 3>(rows, x, w.n_in, y, w.n_out); break;
      default: float_tile<T, W, 4>(rows, x, w.n_in, y, w.n_out); break;
    }
  }
}

// Weight rows in pairs (the last one alone), each applied to all M rows in tiles of up to 4.
template <DType T>
void float_range(const RangeJob& job) {
  const WeightMatrix& w = *job.w;
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
  int64_t o = job.o_begin;
  for (; o + kFloatTileWeights <= job.o_end; o += kFloatTileWeights) {
    const uint8_t* rows[kFloatTileWeights];
    for (int k = 0; k < kFloatTileWeights; ++k) rows[k] = base + (o + k) * w.row_bytes;
    float_tiles<T, kFloatTileWeights>(rows, job, o);
  }
  for (; o < job.o_end; ++o) {
    const uint8_t* row = base + o * w.row_bytes;
    float_tiles<T, 1>(&row, job, o);
  }
}

// y[r][o] for activation rows r0 .. r0 + R - 1 against one unpacked weight row.
template <int R>
void quant_tile(const UnpackedRow& u, bool has_min, const QuantizedActs& acts, int r0, float* y, int64_t n_out) {
  const int64_t n_pad = acts.n_pad, n_lanes = n_pad / 4, n_groups = acts.n_groups_pad;
  const int8_t* a = acts.values + r0 * n_pad;              // (R, n_pad)
  const float* da = acts.lane_scale + r0 * n_lanes;        // (R, n_pad / 4)
  const float* s16 = acts.sums16 + r0 * n_groups;          // (R, n_groups_pad)
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  __m256 acc[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n_pad; i += 32) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(u.q + i));
    const __m256i q_abs = _mm256_sign_epi8(q, q);
    // scale of each group of 4 values: scale16[g] for lanes 0-3, scale16[g + 1] for lanes 4-7
    const __m256 ws = _mm256_permutevar8x32_ps(
        _mm256_castps128_ps256(_mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(u.scale16 + i / 16)))),
        spread);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + r * n_pad + i));
      const __m256i p16 = _mm256_maddubs_epi16(q_abs, _mm256_sign_epi8(av, q));
      const __m256i dp = _mm256_madd_epi16(p16, ones);
      const __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(dp), _mm256_loadu_ps(da + r * n_lanes + i / 4));
      acc[r] = _mm256_fmadd_ps(f, ws, acc[r]);
    }
  }
  if (!has_min) {
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) y[r * n_out] = hsum(acc[r]);
    return;
  }
  __m256 cacc[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) cacc[r] = _mm256_setzero_ps();
  for (int64_t g = 0; g < n_groups; g += 8) {
    const __m256 mn = _mm256_loadu_ps(u.min16 + g);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) cacc[r] = _mm256_fmadd_ps(mn, _mm256_loadu_ps(s16 + r * n_groups + g), cacc[r]);
  }
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) y[r * n_out] = hsum(acc[r]) + hsum(cacc[r]);
}

void quant_range(const RangeJob& job) {
  const WeightMatrix& w = *job.w;
  for (int rb = 0; rb < job.M; rb += kRowBlock) {
    const int rb_end = min_rows(job.M, rb + kRowBlock);
    for (int64_t o = job.o_begin; o < job.o_end; ++o) {
      const void* row = static_cast<const uint8_t*>(w.data) + o * w.row_bytes;
      bool has_min = false;
      if (!try_unpack_row_avx2(w.type, row, w.n_in, job.scratch, &has_min))
        has_min = unpack_row_scalar(w.type, row, w.n_in, job.scratch);
      for (int r0 = rb; r0 < rb_end; r0 += kTileRows) {
        float* y = job.y + r0 * w.n_out + o;
        switch (min_rows(kTileRows, rb_end - r0)) {
          case 1: quant_tile<1>(job.scratch, has_min, job.acts, r0, y, w.n_out); break;
          case 2: quant_tile<2>(job.scratch, has_min, job.acts, r0, y, w.n_out); break;
          case 3: quant_tile<3>(job.scratch, has_min, job.acts, r0, y, w.n_out); break;
          default: quant_tile<4>(job.scratch, has_min, job.acts, r0, y, w.n_out); break;
        }
      }
    }
  }
}

}  // namespace

void matmul_range_avx2(const RangeJob& job) {
  switch (job.w->type) {
    case DType::F32: float_range<DType::F32>(job); break;
    case DType::F16: float_range<DType::F16>(job); break;
    case DType::BF16: float_range<DType::BF16>(job); break;
    default:
      if (!matmul_range_tiled_avx2(job)) quant_range(job);  // Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K: weights read in place
      break;
  }
}

}  // namespace specdec::matmul_detail
