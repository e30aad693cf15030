// dequantize_row / quantize_row: the dispatch by weight type (the formats are in quant_*.cpp).
#include <cstring>
#include <string>

#include "kernels/quant_rows.h"
#include "specdec/error.h"
#include "specdec/kernels.h"

namespace specdec {

namespace {

// Throws unless `type` is a weight type and n a non-negative multiple of its block size.
void check_row(DType type, int64_t n, const char* what) {
  if (!dtype_is_weight_type(type))
    throw Error(std::string(what) + ": type " + dtype_name(type) + " (" +
                std::to_string(static_cast<uint32_t>(type)) + ") is not a weight type");
  (void)dtype_row_bytes(type, n);  // throws when n is not a multiple of the block size
}

}  // namespace

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  using namespace quant;
  check_row(type, n, "dequantize_row");
  switch (type) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case DType::F16: dequantize_row_f16(static_cast<const uint16_t*>(src), dst, n); return;
    case DType::BF16: dequantize_row_bf16(static_cast<const uint16_t*>(src), dst, n); return;
    case DType::Q4_0: dequantize_row_q4_0(static_cast<const BlockQ4_0*>(src), dst, n); return;
    case DType::Q4_1: dequantize_row_q4_1(static_cast<const BlockQ4_1*>(src), dst, n); return;
    case DType::Q5_0: dequantize_row_q5_0(static_cast<const BlockQ5_0*>(src), dst, n); return;
    case DType::Q5_1: dequantize_row_q5_1(static_cast<const BlockQ5_1*>(src), dst, n); return;
    case DType::Q8_0: dequantize_row_q8_0(static_cast<const BlockQ8_0*>(src), dst, n); return;
    case DType::Q2_K: dequantize_row_q2_k(static_cast<const BlockQ2_K*>(src), dst, n); return;
    case DType::Q3_K: dequantize_row_q3_k(static_cast<const BlockQ3_K*>(src), dst, n); return;
    case DType::Q4_K: dequantize_row_q4_k(static_cast<const BlockQ4_K*>(src), dst, n); return;
    case DType::Q5_K: dequantize_row_q5_k(static_cast<const BlockQ5_K*>(src), dst, n); return;
    case DType::Q6_K: dequantize_row_q6_k(static_cast<const BlockQ6_K*>(src), dst, n); return;
    default: break;
  }
  throw Error(std::string("dequantize_row: no dequantizer for type ") + dtype_name(type));
}

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
  using namespace quant;
  check_row(type, n, "quantize_row");
  switch (type) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case DType::F16: quantize_row_f16(src, static_cast<uint16_t*>(dst), n); return;
    case DType::BF16: quantize_row_bf16(src, static_cast<uint16_t*>(dst), n); return;
    case DType::Q4_0: quantize_row_q4_0(src, static_cast<BlockQ4_0*>(dst), n); return;
    case DType::Q4_1: quantize_row_q4_1(src, static_cast<BlockQ4_1*>(dst), n); return;
    case DType::Q5_0: quantize_row_q5_0(src, static_cast<BlockQ5_0*>(dst), n); return;
    case DType::Q5_1: quantize_row_q5_1(src, static_cast<BlockQ5_1*>(dst), n); return;
    case DType::Q8_0: quantize_row_q8_0(src, static_cast<BlockQ8_0*>(dst), n); return;
    case DType::Q2_K: quantize_row_q2_k(src, static_cast<BlockQ2_K*>(dst), n); return;
    case DType::Q3_K: quantize_row_q3_k(src, static_cast<BlockQ3_K*>(dst), n); return;
    case DType::Q4_K: quantize_row_q4_k(src, static_cast<BlockQ4_K*>(dst), n); return;
    case DType::Q5_K: quantize_row_q5_k(src, static_cast<BlockQ5_K*>(dst), n); return;
    case DType::Q6_K: quantize_row_q6_k(src, static_cast<BlockQ6_K*>(dst), n); return;
    default: break;
  }
  throw Error(std::string("quantize_row: no quantizer for type ") + dtype_name(type));
}

}  // namespace specdec
