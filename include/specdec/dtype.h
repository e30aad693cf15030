// specdec/dtype.h — tensor element types (ggml numbering, as stored in GGUF) and block layouts.
//
// Quantized types store rows as blocks of `block_size` values in `type_size` bytes; a row's
// length must be a multiple of block_size. Layouts follow ggml (documented in kernels/quant_*.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace specdec {

enum class DType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, BF16 = 30,
};

struct DTypeInfo {
  const char* name;   // "Q4_K"
  int block_size;     // values per block (1 for plain types)
  int type_size;      // bytes per block
};

// Info for a known ggml type; nullptr for a number we do not know.
const DTypeInfo* dtype_info(uint32_t ggml_type);
const DTypeInfo& dtype_info(DType t);  // throws Error for unknown
const char* dtype_name(DType t);
// Parses "Q4_K", "q8_0", "f16" ...; throws Error listing the valid names.
DType dtype_from_name(const char* name);
// Bytes of a row of n values; throws Error when n is not a multiple of the block size.
size_t dtype_row_bytes(DType t, int64_t n);
// True when dequantize/matmul support this type as a weight.
bool dtype_is_weight_type(DType t);

}  // namespace specdec
