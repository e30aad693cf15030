// Legacy ggml block formats of 32 values: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (weights) and Q8_1
// (activations). Layouts (all little-endian, d/m binary16):
//  - Q4_0 {d, qs[16]}: value j (0..15) in the low nibble of qs[j], value j+16 in the high
//    nibble; x = (q - 8) * d, d = (value of largest magnitude) / -8.
//  - Q4_1 {d, m, qs[16]}: same nibble order, x = q * d + m, d = (max - min) / 15, m = min.
//  - Q5_0 {d, qh[4], qs[16]}: 4 low bits as Q4_0, bit 4 of value j in bit j of the u32 qh;
//    x = (q - 16) * d, d = (value of largest magnitude) / -16.
//  - Q5_1 {d, m, qh[4], qs[16]}: as Q5_0 with x = q * d + m, d = (max - min) / 31.
//  - Q8_0 {d, qs[32]}: x = q * d, d = amax / 127, q = roundf(x / d) (half away from zero).
//  - Q8_1 {d, s, qs[32]}: as Q8_0 plus s = d * sum(q).
// Quantizers follow ggml's reference rounding exactly: truncating casts of x/d + 8.5 (Q4_0),
// + 0.5 (Q4_1, Q5_1), + 16.5 (Q5_0), and multiply by the reciprocal id = 1/d (not divide).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant_rows.h"
#include "kernels/quantize_activations.h"
#include "specdec/kernels.h"

namespace specdec::quant {

namespace {

// Value of largest magnitude in x[0..n) (first one on ties), as ggml's Q4_0/Q5_0 pick it.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void min_max(const float* x, int n, float* min_out, float* max_out) {
  float min = 3.402823466e+38f;
  float max = -3.402823466e+38f;
  for (int j = 0; j < n; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  *min_out = min;
  *max_out = max;
}

float absmax(const float* x, int n) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}

}  // namespace

// ---------------------------------------------------------------- dequantization

void dequantize_row_q4_0(const BlockQ4_0* src, float* dst, int64_t n) {
  const int64_t n_blocks = n / QK4_0;
  for (int64_t b = 0; b < n_blocks; ++b, dst += QK4_0) {
    const float d = fp16_to_f32(src[b].d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      const int lo = (src[b].qs[j] & 0x0F) - 8;
      const int hi = (src[b].qs[j] >> 4) - 8;
      dst[j] = static_cast<float>(lo) * d;
      dst[j + QK4_0 / 2] = static_cast<float>(hi) * d;
    }
  }
}

void dequantize_row_q4_1(const BlockQ4_1* src, float* dst, int64_t n) {
  const int64_t n_blocks = n / QK4_1;
  for (int64_t b = 0; b < n_blocks; ++b, dst += QK4_1) {
    const float d = fp16_to_f32(src[b].d);
    const float m = fp16_to_f32(src[b].m);
    for (int j = 0; j < QK4_1 / 2; ++j) {
      const int lo = src[b].qs[j] & 0x0F;
      const int hi = src[b].qs[j] >> 4;
      dst[j] = static_cast<float>(lo) * d + m;
      dst[j + QK4_1 / 2] = static_cast<float>(hi) * d + m;
    }
  }
}

void dequantize_row_q5_0(const BlockQ5_0* src, float* dst, int64_t n) {
  const int64_t n_blocks = n / QK5_0;
  for (int64_t b = 0; b < n_blocks; ++b, dst += QK5_0) {
    const float d = fp16_to_f32(src[b].d);
    uint32_t qh;
    std::memcpy(&qh, src[b].qh, sizeof(qh));
    for (int j = 0; j < QK5_0 / 2; ++j) {
      const int bit_lo = static_cast<int>((qh >> j) & 1u) << 4;
      const int bit_hi = static_cast<int>((qh >> (j + QK5_0 / 2)) & 1u) << 4;
      const int lo = ((src[b].qs[j] & 0x0F) | bit_lo) - 16;
      const int hi = ((src[b].qs[j] >> 4) | bit_hi) - 16;
      dst[j] = static_cast<float>(lo) * d;
      dst[j + QK5_0 / 2] = static_cast<float>(hi) * d;
    }
  }
}

void dequantize_row_q5_1(const BlockQ5_1* src, float* dst, int64_t n) {
  const int64_t n_blocks = n / QK5_1;
  for (int64_t b = 0; b < n_blocks; ++b, dst += QK5_1) {
    const float d = fp16_to_f32(src[b].d);
    const float m = fp16_to_f32(src[b].m);
    uint32_t qh;
    std::memcpy(&qh, src[b].qh, sizeof(qh));
    for (int j = 0; j < QK5_1 / 2; ++j) {
      const int bit_lo = static_cast<int>((qh >> j) & 1u) << 4;
      const int bit_hi = static_cast<int>((qh >> (j + QK5_1 / 2)) & 1u) << 4;
      const int lo = (src[b].qs[j] & 0x0F) | bit_lo;
      const int hi = (src[b].qs[j] >> 4) | bit_hi;
      dst[j] = static_cast<float>(lo) * d + m;
      dst[j + QK5_1 / 2] = static_cast<float>(hi) * d + m;
    }
  }
}

void dequantize_row_q8_0(const BlockQ8_0* src, float* dst, int64_t n) {
  const int64_t n_blocks = n / QK8_0;
  for (int64_t b = 0; b < n_blocks; ++b, dst += QK8_0) {
    const float d = fp16_to_f32(src[b].d);
    for (int j = 0; j < QK8_0; ++j) dst[j] = static_cast<float>(src[b].qs[j]) * d;
  }
}

// ---------------------------------------------------------------- quantization

void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n) {
  const int64_t n_blocks = n / QK4_0;
  for (int64_t b = 0; b < n_blocks; ++b, src += QK4_0) {
    const float d = signed_absmax(src, QK4_0) / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = f32_to_fp16(d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
      const int lo = std::min(15, static_cast<int>(src[j] * id + 8.5f));
      const int hi = std::min(15, static_cast<int>(src[j + QK4_0 / 2] * id + 8.5f));
      dst[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_row_q4_1(const float* src, BlockQ4_1* dst, int64_t n) {
  const int64_t n_blocks = n / QK4_1;
  for (int64_t b = 0; b < n_blocks; ++b, src += QK4_1) {
    float min, max;
    min_max(src, QK4_1, &min, &max);
    const float d = (max - min) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = f32_to_fp16(d);
    dst[b].m = f32_to_fp16(min);
    for (int j = 0; j < QK4_1 / 2; ++j) {
      const int lo = std::min(15, static_cast<int>((src[j] - min) * id + 0.5f));
      const int hi = std::min(15, static_cast<int>((src[j + QK4_1 / 2] - min) * id + 0.5f));
      dst[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_row_q5_0(const float* src, BlockQ5_0* dst, int64_t n) {
  const int64_t n_blocks = n / QK5_0;
  for (int64_t b = 0; b < n_blocks; ++b, src += QK5_0) {
    const float d = signed_absmax(src, QK5_0) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = f32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_0 / 2; ++j) {
      const int lo = std::min(31, static_cast<int>(src[j] * id + 16.5f));
      const int hi = std::min(31, static_cast<int>(src[j + QK5_0 / 2] * id + 16.5f));
      dst[b].qs[j] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
      qh |= static_cast<uint32_t>((lo >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((hi >> 4) & 1) << (j + QK5_0 / 2);
    }
    std::memcpy(dst[b].qh, &qh, sizeof(qh));
  }
}

void quantize_row_q5_1(const float* src, BlockQ5_1* dst, int64_t n) {
  const int64_t n_blocks = n / QK5_1;
  for (int64_t b = 0; b < n_blocks; ++b, src += QK5_1) {
    float min, max;
    min_max(src, QK5_1, &min, &max);
    const float d = (max - min) / 31;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = f32_to_fp16(d);
    dst[b].m = f32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_1 / 2; ++j) {
      // ggml truncates to uint8 without clamping; the values lie in [0, 31.5].
      const int lo = static_cast<uint8_t>((src[j] - min) * id + 0.5f);
      const int hi = static_cast<uint8_t>((src[j + QK5_1 / 2] - min) * id + 0.5f);
      dst[b].qs[j] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
      qh |= static_cast<uint32_t>((lo >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((hi >> 4) & 1) << (j + QK5_1 / 2);
    }
    std::memcpy(dst[b].qh, &qh, sizeof(qh));
  }
}

void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n) {
  const int64_t n_blocks = n / QK8_0;
  for (int64_t b = 0; b < n_blocks; ++b, src += QK8_0) {
    const float d = absmax(src, QK8_0) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = f32_to_fp16(d);
    for (int j = 0; j < QK8_0; ++j) dst[b].qs[j] = static_cast<int8_t>(std::round(src[j] * id));
  }
}

void quantize_row_q8_1(const float* src, BlockQ8_1* dst, int64_t n) {
  const int64_t n_blocks = n / QK8_1;
  for (int64_t b = 0; b < n_blocks; ++b, src += QK8_1) {
    const float d = absmax(src, QK8_1) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = f32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < QK8_1; ++j) {
      dst[b].qs[j] = static_cast<int8_t>(std::round(src[j] * id));
      sum += dst[b].qs[j];
    }
    dst[b].s = f32_to_fp16(static_cast<float>(sum) * d);
  }
}

}  // namespace specdec::quant
