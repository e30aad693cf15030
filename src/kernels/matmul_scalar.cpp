// Scalar reference path of matmul (portable C++; the SIMD paths follow the same data layout).
// Per-row operation order, identical for every M and tile position:
//  - float weights: acc += w[i] * x[i] for i = 0, 1, ... (one float accumulator).
//  - quantized weights: for each group of 4 values, acc += (float(sum of 4 q*a) * d) * scale,
//    in order; then the additive terms c += min16[g] * s16[g] in order; y = acc + c.
#include <algorithm>

#include "kernels/matmul_internal.h"

namespace specdec::matmul_detail {

namespace {

constexpr int kTileRows = 4;

float load_weight(DType type, const uint8_t* row, int64_t i) {
  if (type == DType::F16) return fp16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
  if (type == DType::BF16) return bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
  return reinterpret_cast<const float*>(row)[i];
}

void float_range(const RangeJob& job) {
  const WeightMatrix& w = *job.w;
  for (int64_t o = job.o_begin; o < job.o_end; ++o) {
    const uint8_t* row = static_cast<const uint8_t*>(w.data) + o * w.row_bytes;
    for (int r0 = 0; r0 < job.M; r0 += kTileRows) {
      const int n_rows = std::min(kTileRows, job.M - r0);
      float acc[kTileRows] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int64_t i = 0; i < w.n_in; ++i) {
        const float wv = load_weight(w.type, row, i);
        #pragma GCC unroll 8
        for (int r = 0; r < n_rows; ++r) acc[r] += wv * job.x[(r0 + r) * w.n_in + i];
      }
      #pragma GCC unroll 8
      for (int r = 0; r < n_rows; ++r) job.y[(r0 + r) * w.n_out + o] = acc[r];
    }
  }
}

float quant_dot(const UnpackedRow& u, bool has_min, const QuantizedActs& acts, int r, int64_t n_in) {
  const int8_t* a = acts.values + r * acts.row_stride;           // (n_pad)
  const float* da = acts.scales32 + r * (acts.row_stride / 32);  // (n_pad / 32)
  const float* s16 = acts.sums16 + r * acts.group_stride;        // (n_groups_pad)
  float acc = 0.0f;
  for (int64_t lane = 0; lane < n_in / 4; ++lane) {
    const int8_t* q = u.q + 4 * lane;
    const int8_t* al = a + 4 * lane;
    const int dp = q[0] * al[0] + q[1] * al[1] + q[2] * al[2] + q[3] * al[3];
    acc += (static_cast<float>(dp) * da[lane / 8]) * u.scale16[lane / 4];
  }
  float c = 0.0f;
  if (has_min)
    for (int64_t g = 0; g < n_in / 16; ++g) c += u.min16[g] * s16[g];
  return acc + c;
}

void quant_range(const RangeJob& job) {
  const WeightMatrix& w = *job.w;
  for (int rb = 0; rb < job.M; rb += kRowBlock) {
    const int rb_end = std::min(job.M, rb + kRowBlock);
    for (int64_t o = job.o_begin; o < job.o_end; ++o) {
      const bool has_min =
          unpack_row_scalar(w.type, static_cast<const uint8_t*>(w.data) + o * w.row_bytes, w.n_in, job.scratch);
      for (int r = rb; r < rb_end; ++r) job.y[r * w.n_out + o] = quant_dot(job.scratch, has_min, job.acts, r, w.n_in);
    }
  }
}

}  // namespace

void matmul_range_scalar(const RangeJob& job) {
  if (is_float_weight(job.w->type)) {
    float_range(job);
  } else {
    quant_range(job);
  }
}

}  // namespace specdec::matmul_detail
