// kernels/quantize_activations.h — 8-bit quantization of activation rows for the integer
// matmul paths (internal to the kernels layer). Formats as ggml's:
//  - Q8_0: blocks of 32, x ~= d * q, d = amax / 127 stored as binary16, q = round(x / d).
//  - Q8_1: as Q8_0 plus s = d * sum(q) (binary16), for formats with a min (Q4_1, Q5_1).
//  - Q8_K: blocks of 256, float d, q = nearest(x * -127 / max) clamped to 127 (max = the value
//    of largest magnitude, so q spans [-127, 127]), bsums[j] = sum of q over values 16j..16j+15.
// Each block is computed from that block's values only (batch-invariant by construction).
// Requires: n a multiple of the block size (32, 32, 256). Cost: O(n), scalar.
#pragma once

#include <cstdint>

#include "kernels/quant_blocks.h"

namespace specdec::quant {

// Same as quantize_row(DType::Q8_0, ...): ggml's quantize_row_q8_0_ref.
void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n);
// ggml's quantize_row_q8_1_ref.
void quantize_row_q8_1(const float* src, BlockQ8_1* dst, int64_t n);
// ggml's quantize_row_q8_K_ref.
void quantize_row_q8_k(const float* src, BlockQ8_K* dst, int64_t n);

}  // namespace specdec::quant
