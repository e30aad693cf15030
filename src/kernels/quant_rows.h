// kernels/quant_rows.h — per-type row (de)quantizers behind dequantize_row / quantize_row
// (internal to the kernels layer; the dispatch by type is in quant_dispatch.cpp).
//
// Contracts shared by every function here:
//  - requires: n >= 0 and n a multiple of the type's block size (the dispatcher checks);
//    src/dst hold n values / n / block_size blocks.
//  - dequantize_row_*: bit-identical to ggml's reference dequantization (same float operations
//    in the same order; compiled with -ffp-contract=off).
//  - quantize_row_*: ggml's reference quantizer for the type (no importance matrix), so a row
//    quantized here equals llama.cpp's `quantize` output for that row.
//  - cost: O(n); the K-quant quantizers search scales (about 20-40 passes over each sub-block).
#pragma once

#include <cstdint>

#include "kernels/quant_blocks.h"

namespace specdec::quant {

// ---- plain floats (F32 copy, IEEE binary16, bfloat16)
void dequantize_row_f16(const uint16_t* src, float* dst, int64_t n);
void quantize_row_f16(const float* src, uint16_t* dst, int64_t n);
void dequantize_row_bf16(const uint16_t* src, float* dst, int64_t n);
void quantize_row_bf16(const float* src, uint16_t* dst, int64_t n);

// ---- legacy 32-value blocks (quant_legacy.cpp)
void dequantize_row_q4_0(const BlockQ4_0* src, float* dst, int64_t n);
void dequantize_row_q4_1(const BlockQ4_1* src, float* dst, int64_t n);
void dequantize_row_q5_0(const BlockQ5_0* src, float* dst, int64_t n);
void dequantize_row_q5_1(const BlockQ5_1* src, float* dst, int64_t n);
void dequantize_row_q8_0(const BlockQ8_0* src, float* dst, int64_t n);
void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n);
void quantize_row_q4_1(const float* src, BlockQ4_1* dst, int64_t n);
void quantize_row_q5_0(const float* src, BlockQ5_0* dst, int64_t n);
void quantize_row_q5_1(const float* src, BlockQ5_1* dst, int64_t n);
void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n);

// ---- K-quants, 256-value super-blocks (quant_q2k_q3k.cpp, quant_q4k_q5k.cpp, quant_q6k.cpp)
void dequantize_row_q2_k(const BlockQ2_K* src, float* dst, int64_t n);
void dequantize_row_q3_k(const BlockQ3_K* src, float* dst, int64_t n);
void dequantize_row_q4_k(const BlockQ4_K* src, float* dst, int64_t n);
void dequantize_row_q5_k(const BlockQ5_K* src, float* dst, int64_t n);
void dequantize_row_q6_k(const BlockQ6_K* src, float* dst, int64_t n);
// Q6_K's 256 6-bit levels (q + 32, 0..63) of a super-block, unpacked from its ql and qh and
// packed into them (the layout in quant_q6k.cpp; repack.cpp's Q6KTiles8 re-encodes them).
void q6_k_unpack_levels(const BlockQ6_K& block, uint8_t* levels);  // levels: (256)
void q6_k_pack_levels(const uint8_t* levels, BlockQ6_K& block);    // sets ql, qh only
void quantize_row_q2_k(const float* src, BlockQ2_K* dst, int64_t n);
void quantize_row_q3_k(const float* src, BlockQ3_K* dst, int64_t n);
void quantize_row_q4_k(const float* src, BlockQ4_K* dst, int64_t n);
void quantize_row_q5_k(const float* src, BlockQ5_K* dst, int64_t n);
void quantize_row_q6_k(const float* src, BlockQ6_K* dst, int64_t n);

// Unpacks the 6-bit scale and min of sub-block j (0..7) from a Q4_K/Q5_K `scales` array:
// bytes 0..3 hold scales 0..3 (low 6 bits), bytes 4..7 mins 0..3, bytes 8..11 the low nibbles
// of scales/mins 4..7 whose top 2 bits sit in the top bits of bytes 0..7.
inline void unpack_scale_min_k4(int j, const uint8_t* scales, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = scales[j] & 63;
    *min = scales[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

}  // namespace specdec::quant
