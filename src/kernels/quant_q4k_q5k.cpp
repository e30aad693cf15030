// Q4_K and Q5_K: 256-value super-blocks of 8 sub-blocks of 32 values, each with a 6-bit scale
// and a 6-bit min (packed in scales[12], see unpack_scale_min_k4 in quant_rows.h):
// x = d * scale * q - dmin * min.
//  - Q4_K {d, dmin, scales[12], qs[128]}: q in 0..15; values 64c + l (l < 32) in the low nibble
//    of qs[32c + l], values 64c + 32 + l in the high nibble.
//  - Q5_K {d, dmin, scales[12], qh[32], qs[128]}: the 4 low bits as Q4_K, bit 4 of value
//    32s + l at bit s of qh[l] (s = sub-block 0..7); q in 0..31.
// Quantizer (ggml reference): per sub-block make_qkx2_quants with weights av_x + |x|, 6-bit
// scales/mins relative to the largest, then every value re-quantized to the rounded scales.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant_rows.h"
#include "kernels/quant_scale_search.h"
#include "specdec/kernels.h"

namespace specdec::quant {

namespace {

// Chooses levels (0..nmax), the packed 6-bit scales/mins and d/dmin of one super-block.
// levels: (256); scales_packed: (12).
void quantize_superblock_k(const float* x, int nmax, float rmin, float rdelta, int nstep,
                           uint8_t* levels, uint8_t* scales_packed, uint16_t* d_out,
                           uint16_t* dmin_out) {
  uint8_t scratch[32];      // (32)
  float weights[32];        // (32)
  float scales[QK_K / 32];  // (8)
  float mins[QK_K / 32];    // (8)
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < QK_K / 32; ++j) {
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, levels + 32 * j, &mins[j],
                                 scratch, rmin, rdelta, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  for (int j = 0; j < QK_K / 32; ++j) {
    // ggml stores nearest_int into a uint8 (wrapping) before clamping to 63.
    uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
    uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
    ls = std::min<uint8_t>(63, ls);
    lm = std::min<uint8_t>(63, lm);
    if (j < 4) {
      scales_packed[j] = ls;
      scales_packed[j + 4] = lm;
    } else {
      scales_packed[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      scales_packed[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      scales_packed[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  *d_out = f32_to_fp16(max_scale / 63.0f);
  *dmin_out = f32_to_fp16(max_min / 63.0f);
  for (int j = 0; j < QK_K / 32; ++j) {
    uint8_t sc, m;
    unpack_scale_min_k4(j, scales_packed, &sc, &m);
    const float d = fp16_to_f32(*d_out) * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = fp16_to_f32(*dmin_out) * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const int q = nearest_int((x[32 * j + l] + dm) / d);
      levels[32 * j + l] = static_cast<uint8_t>(std::max(0, std::min(nmax, q)));
    }
  }
}

}  // namespace

void dequantize_row_q4_k(const BlockQ4_K* src, float* dst, int64_t n) {
  const int64_t n_blocks = n / QK_K;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ4_K& block = src[b];
    const float d = fp16_to_f32(block.d);
    const float dmin = fp16_to_f32(block.dmin);
    for (int sub = 0; sub < QK_K / 32; ++sub) {
      uint8_t sc, m;
      unpack_scale_min_k4(sub, block.scales, &sc, &m);
      const float d_sub = d * static_cast<float>(sc);
      const float m_sub = dmin * static_cast<float>(m);
      const uint8_t* qs = block.qs + 32 * (sub / 2);
      const int shift = 4 * (sub % 2);
      float* out = dst + b * QK_K + 32 * sub;
      for (int l = 0; l < 32; ++l)
        out[l] = d_sub * static_cast<float>((qs[l] >> shift) & 0xF) - m_sub;
    }
  }
}

void dequantize_row_q5_k(const BlockQ5_K* src, float* dst, int64_t n) {
  const int64_t n_blocks = n / QK_K;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ5_K& block = src[b];
    const float d = fp16_to_f32(block.d);
    const float dmin = fp16_to_f32(block.dmin);
    for (int sub = 0; sub < QK_K / 32; ++sub) {
      uint8_t sc, m;
      unpack_scale_min_k4(sub, block.scales, &sc, &m);
      const float d_sub = d * static_cast<float>(sc);
      const float m_sub = dmin * static_cast<float>(m);
      const uint8_t* qs = block.qs + 32 * (sub / 2);
      const int shift = 4 * (sub % 2);
      float* out = dst + b * QK_K + 32 * sub;
      for (int l = 0; l < 32; ++l) {
        const int q = ((qs[l] >> shift) & 0xF) + (((block.qh[l] >> sub) & 1) ? 16 : 0);
        out[l] = d_sub * static_cast<float>(q) - m_sub;
      }
    }
  }
}

void quantize_row_q4_k(const float* src, BlockQ4_K* dst, int64_t n) {
  const int64_t n_blocks = n / QK_K;
  for (int64_t b = 0; b < n_blocks; ++b, src += QK_K) {
    BlockQ4_K& block = dst[b];
    uint8_t levels[QK_K];  // (256) 0..15
    std::memset(block.scales, 0, sizeof(block.scales));
    quantize_superblock_k(src, 15, -1.0f, 0.1f, 20, levels, block.scales, &block.d, &block.dmin);
    for (int c = 0; c < QK_K / 64; ++c)
      for (int l = 0; l < 32; ++l)
        block.qs[32 * c + l] =
            static_cast<uint8_t>(levels[64 * c + l] | (levels[64 * c + 32 + l] << 4));
  }
}

void quantize_row_q5_k(const float* src, BlockQ5_K* dst, int64_t n) {
  const int64_t n_blocks = n / QK_K;
  for (int64_t b = 0; b < n_blocks; ++b, src += QK_K) {
    BlockQ5_K& block = dst[b];
    uint8_t levels[QK_K];  // (256) 0..31
    std::memset(block.scales, 0, sizeof(block.scales));
    quantize_superblock_k(src, 31, -0.5f, 0.1f, 15, levels, block.scales, &block.d, &block.dmin);
    std::memset(block.qh, 0, sizeof(block.qh));
    for (int c = 0; c < QK_K / 64; ++c) {
      for (int l = 0; l < 32; ++l) {
        int lo = levels[64 * c + l];
        int hi = levels[64 * c + 32 + l];
        if (lo > 15) {
          lo -= 16;
          block.qh[l] |= static_cast<uint8_t>(1u << (2 * c));
        }
        if (hi > 15) {
          hi -= 16;
          block.qh[l] |= static_cast<uint8_t>(1u << (2 * c + 1));
        }
        block.qs[32 * c + l] = static_cast<uint8_t>(lo | (hi << 4));
      }
    }
  }
}

}  // namespace specdec::quant
