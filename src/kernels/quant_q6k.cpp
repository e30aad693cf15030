// Q6_K (weights) and Q8_K (activations), 256-value super-blocks.
//  - Q6_K {ql[128], qh[64], scales[16] (int8), d}: 16 sub-blocks of 16 values,
//    x = d * scale * (q - 32), q in 0..63. In each half h (128 values), value 32s + l
//    (s 0..3, l 0..31) has its low nibble in ql[64h + 32(s%2) + l] (low nibble for s < 2, high
//    for s >= 2) and its 2 high bits at bits 2s of qh[32h + l].
//  - Q8_K {float d, qs[256], bsums[16]}: x = d * q, bsums[j] = sum of q over 16j..16j+15.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant_rows.h"
#include "kernels/quant_scale_search.h"
#include "kernels/quantize_activations.h"
#include "specdec/kernels.h"

namespace specdec::quant {

void q6_k_unpack_levels(const BlockQ6_K& block, uint8_t* levels) {
  // Level i = 128 half + 32 s + l; the inner loop runs over l, so it vectorizes (the repack
  // decodes every Q6_K super-block this way at load time).
  for (int half = 0; half < 2; ++half) {
    for (int s = 0; s < 4; ++s) {
      const uint8_t* ql = block.ql + 64 * half + 32 * (s % 2);
      const uint8_t* qh = block.qh + 32 * half;
      uint8_t* out = levels + 128 * half + 32 * s;
      for (int l = 0; l < 32; ++l) {
        const int low = (ql[l] >> (4 * (s / 2))) & 0xF;
        const int high = (qh[l] >> (2 * s)) & 3;
        out[l] = static_cast<uint8_t>(low | (high << 4));
      }
    }
  }
}

void q6_k_pack_levels(const uint8_t* levels, BlockQ6_K& block) {
  for (int half = 0; half < 2; ++half) {
    const uint8_t* lv = levels + 128 * half;
    uint8_t* ql = block.ql + 64 * half;
    uint8_t* qh = block.qh + 32 * half;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((lv[l] & 0xF) | ((lv[l + 64] & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((lv[l + 32] & 0xF) | ((lv[l + 96] & 0xF) << 4));
      qh[l] = static_cast<uint8_t>((lv[l] >> 4) | ((lv[l + 32] >> 4) << 2) | ((lv[l + 64] >> 4) << 4) | ((lv[l + 96] >> 4) << 6));
    }
  }
}

void dequantize_row_q6_k(const BlockQ6_K* src, float* dst, int64_t n) {
  const int64_t n_blocks = n / QK_K;
  uint8_t levels[QK_K];  // (256) q + 32
  for (int64_t b = 0; b < n_blocks; ++b) {
    const BlockQ6_K& block = src[b];
    const float d = fp16_to_f32(block.d);
    q6_k_unpack_levels(block, levels);
    for (int i = 0; i < QK_K; ++i) {
      const int q = static_cast<int>(levels[i]) - 32;
      dst[b * QK_K + i] = d * static_cast<float>(block.scales[i / 16]) * static_cast<float>(q);
    }
  }
}

void quantize_row_q6_k(const float* src, BlockQ6_K* dst, int64_t n) {
  constexpr float kGroupMaxEps = 1e-15f;
  const int64_t n_blocks = n / QK_K;
  for (int64_t b = 0; b < n_blocks; ++b, src += QK_K) {
    BlockQ6_K& block = dst[b];
    int8_t levels[QK_K];      // (256) 0..63
    float scales[QK_K / 16];  // (16) signed
    float max_scale = 0.0f, max_abs_scale = 0.0f;
    for (int j = 0; j < QK_K / 16; ++j) {
      scales[j] = make_qx_quants_rmse(16, 32, src + 16 * j, levels + 16 * j);
      const float a = std::fabs(scales[j]);
      if (a > max_abs_scale) {
        max_abs_scale = a;
        max_scale = scales[j];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&block, 0, sizeof(block));
      block.d = f32_to_fp16(0.0f);
      continue;
    }
    const float iscale = -128.0f / max_scale;
    block.d = f32_to_fp16(1.0f / iscale);
    for (int j = 0; j < QK_K / 16; ++j)
      block.scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
    for (int j = 0; j < QK_K / 16; ++j) {
      const float d = fp16_to_f32(block.d) * static_cast<float>(block.scales[j]);
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l) {
        const int q = nearest_int(src[16 * j + l] / d);
        levels[16 * j + l] = static_cast<int8_t>(std::max(-32, std::min(31, q)) + 32);
      }
    }
    q6_k_pack_levels(reinterpret_cast<const uint8_t*>(levels), block);  // 0..63: the same bytes
  }
}

void quantize_row_q8_k(const float* src, BlockQ8_K* dst, int64_t n) {
  const int64_t n_blocks = n / QK_K;
  for (int64_t b = 0; b < n_blocks; ++b, src += QK_K) {
    BlockQ8_K& block = dst[b];
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < QK_K; ++i) {
      const float a = std::fabs(src[i]);
      if (a > amax) {
        amax = a;
        max = src[i];
      }
    }
    if (amax == 0.0f) {
      std::memset(&block, 0, sizeof(block));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int i = 0; i < QK_K; ++i)
      block.qs[i] = static_cast<int8_t>(std::min(127, nearest_int(iscale * src[i])));
    for (int j = 0; j < QK_K / 16; ++j) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += block.qs[16 * j + l];
      block.bsums[j] = static_cast<int16_t>(sum);
    }
    block.d = 1.0f / iscale;
  }
}

}  // namespace specdec::quant
