// Q2_K and Q3_K: 256-value super-blocks of 16 sub-blocks of 16 values.
//  - Q2_K {scales[16], qs[64], d, dmin}: scales[j] = (4-bit scale) | (4-bit min) << 4;
//    x = d * scale * q - dmin * min, q in 0..3. Value 128h + 32s + l (h half, s shift index,
//    l 0..31) sits in bits 2s of qs[32h + l].
//  - Q3_K {hmask[32], qs[64], scales[12], d}: 16 6-bit signed scales (stored + 32): the low
//    nibble of scale j in scales[j % 8] (low nibble for j < 8, high for j >= 8), its top 2 bits
//    at bits 2*(j/4) of scales[8 + j % 4]. x = d * (scale - 32) * (q - 4), q in 0..7: the low
//    2 bits packed as Q2_K, bit 2 (the "high" bit) of value i at bit i/32 of hmask[i % 32].
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant_rows.h"
#include "kernels/quant_scale_search.h"
#include "specdec/kernels.h"

namespace specdec::quant {

namespace {

// Packs 256 2-bit levels: value 128h + 32s + l -> bits 2s of qs[32h + l].
void pack_2bit(const uint8_t* levels, uint8_t* qs) {  // levels: (256) in 0..3; qs: (64)
  for (int h = 0; h < QK_K; h += 128)
    for (int l = 0; l < 32; ++l)
      qs[h / 4 + l] = static_cast<uint8_t>(levels[h + l] | (levels[h + l + 32] << 2) |
                                           (levels[h + l + 64] << 4) | (levels[h + l + 96] << 6));
}

// The 6-bit Q3_K scale of sub-block j minus 32.
int q3k_scale(const uint8_t* scales, int j) {
  const int low = j < 8 ? (scales[j] & 0xF) : (scales[j - 8] >> 4);
  const int high = (scales[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace

void dequantize_row_q2_k(const BlockQ2_K* src, float* dst, int64_t n) {
  const int64_t n_blocks = n / QK_K;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ2_K& block = src[b];
    const float d = fp16_to_f32(block.d);
    const float dmin = fp16_to_f32(block.dmin);
    for (int i = 0; i < QK_K; ++i) {
      const int sub = i / 16;
      const int half = i / 128, shift = 2 * ((i % 128) / 32), l = i % 32;
      const int q = (block.qs[32 * half + l] >> shift) & 3;
      const float dl = d * static_cast<float>(block.scales[sub] & 0xF);
      const float ml = dmin * static_cast<float>(block.scales[sub] >> 4);
      dst[b * QK_K + i] = dl * static_cast<float>(q) - ml;
    }
  }
}

void dequantize_row_q3_k(const BlockQ3_K* src, float* dst, int64_t n) {
  const int64_t n_blocks = n / QK_K;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ3_K& block = src[b];
    const float d = fp16_to_f32(block.d);
    for (int i = 0; i < QK_K; ++i) {
      const int sub = i / 16;
      const int half = i / 128, shift = 2 * ((i % 128) / 32), l = i % 32;
      const int low = (block.qs[32 * half + l] >> shift) & 3;
      const bool high_bit = (block.hmask[l] >> (i / 32)) & 1;
      const float dl = d * static_cast<float>(q3k_scale(block.scales, sub));
      dst[b * QK_K + i] = dl * static_cast<float>(low - (high_bit ? 0 : 4));
    }
  }
}

void quantize_row_q2_k(const float* src, BlockQ2_K* dst, int64_t n) {
  const int64_t n_blocks = n / QK_K;
  constexpr float kLevels = 15.0f;  // 4-bit scales and mins
  for (int64_t b = 0; b < n_blocks; ++b, src += QK_K) {
    BlockQ2_K& block = dst[b];
    uint8_t levels[QK_K];       // (256) 0..3
    uint8_t scratch[16];        // (16)
    float weights[16];          // (16)
    float scales[QK_K / 16];    // (16)
    float mins[QK_K / 16];      // (16)
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < QK_K / 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(src[16 * j + l]);
      scales[j] = make_qkx2_quants(16, 3, src + 16 * j, weights, levels + 16 * j, &mins[j],
                                   scratch, -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0.0f) {
      const float iscale = kLevels / max_scale;
      for (int j = 0; j < QK_K / 16; ++j)
        block.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      block.d = f32_to_fp16(max_scale / kLevels);
    } else {
      for (int j = 0; j < QK_K / 16; ++j) block.scales[j] = 0;
      block.d = f32_to_fp16(0.0f);
    }
    if (max_min > 0.0f) {
      const float iscale = kLevels / max_min;
      for (int j = 0; j < QK_K / 16; ++j)
        block.scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
      block.dmin = f32_to_fp16(max_min / kLevels);
    } else {
      block.dmin = f32_to_fp16(0.0f);
    }
    // Re-quantize every value against the rounded scales and mins.
    for (int j = 0; j < QK_K / 16; ++j) {
      const float d = fp16_to_f32(block.d) * static_cast<float>(block.scales[j] & 0xF);
      if (d == 0.0f) continue;
      const float dm = fp16_to_f32(block.dmin) * static_cast<float>(block.scales[j] >> 4);
      for (int l = 0; l < 16; ++l) {
        const int q = nearest_int((src[16 * j + l] + dm) / d);
        levels[16 * j + l] = static_cast<uint8_t>(std::max(0, std::min(3, q)));
      }
    }
    pack_2bit(levels, block.qs);
  }
}

void quantize_row_q3_k(const float* src, BlockQ3_K* dst, int64_t n) {
  const int64_t n_blocks = n / QK_K;
  for (int64_t b = 0; b < n_blocks; ++b, src += QK_K) {
    BlockQ3_K& block = dst[b];
    int8_t levels[QK_K];      // (256) 0..7
    float scales[QK_K / 16];  // (16) signed
    float max_scale = 0.0f, amax = 0.0f;
    for (int j = 0; j < QK_K / 16; ++j) {
      scales[j] = make_q3_quants(16, 4, src + 16 * j, levels + 16 * j);
      const float a = std::fabs(scales[j]);
      if (a > amax) {
        amax = a;
        max_scale = scales[j];
      }
    }
    std::memset(block.scales, 0, sizeof(block.scales));
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      for (int j = 0; j < QK_K / 16; ++j) {
        const int8_t rounded = static_cast<int8_t>(nearest_int(iscale * scales[j]));
        const int l = std::max(-32, std::min(31, static_cast<int>(rounded))) + 32;  // 0..63
        if (j < 8)
          block.scales[j] = static_cast<uint8_t>(l & 0xF);
        else
          block.scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
        block.scales[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
      }
      block.d = f32_to_fp16(1.0f / iscale);
    } else {
      block.d = f32_to_fp16(0.0f);
    }
    for (int j = 0; j < QK_K / 16; ++j) {
      const float d = fp16_to_f32(block.d) * static_cast<float>(q3k_scale(block.scales, j));
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l) {
        const int q = nearest_int(src[16 * j + l] / d);
        levels[16 * j + l] = static_cast<int8_t>(std::max(-4, std::min(3, q)) + 4);
      }
    }
    // High bit of value i -> bit i/32 of hmask[i % 32]; keep the low 2 bits in levels.
    std::memset(block.hmask, 0, sizeof(block.hmask));
    uint8_t low_levels[QK_K];  // (256) 0..3
    for (int i = 0; i < QK_K; ++i) {
      int level = levels[i];
      if (level > 3) {
        block.hmask[i % 32] |= static_cast<uint8_t>(1u << (i / 32));
        level -= 4;
      }
      low_levels[i] = static_cast<uint8_t>(level);
    }
    pack_2bit(low_levels, block.qs);
  }
}

}  // namespace specdec::quant
