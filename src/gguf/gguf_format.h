// gguf/gguf_format.h — constants and small helpers shared by the GGUF reader and writer
// (private to src/gguf/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "specdec/gguf.h"

namespace specdec::gguf_detail {

constexpr uint8_t kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint32_t kWriteVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr const char* kAlignmentKey = "general.alignment";

// Limits the reader enforces before allocating anything (real models are far below them: the
// largest vocabularies hold ~256K tokens, i.e. < 2M array items with scores, types and merges).
// They bound memory, not just file offsets: a parsed array item is a 48-byte GgufValue, so a
// 1-byte U8 item costs 48x its file size, and an entry or tensor info ~150 bytes; with these
// limits a hostile file can make the parser allocate at most ~1 GiB in total.
constexpr uint64_t kMaxTensors = uint64_t{1} << 20;
constexpr uint64_t kMaxMetadataEntries = uint64_t{1} << 20;
constexpr uint64_t kMaxArrayLength = uint64_t{1} << 24;
constexpr uint64_t kMaxTotalArrayItems = uint64_t{1} << 24;  // over all arrays of a file
constexpr int kMaxArrayDepth = 8;                            // nesting of arrays in arrays
constexpr uint32_t kMaxDims = 4;                             // ggml's GGML_MAX_DIMS
constexpr uint64_t kMaxAlignment = uint64_t{1} << 30;

// True for the 13 value types of the GGUF spec.
inline bool is_known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::F64); }

// Encoded size of a scalar value type in bytes; 0 for STRING and ARRAY (variable length).
inline size_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::BOOL: return 1;
    case GgufValueType::U16: case GgufValueType::I16: return 2;
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
    case GgufValueType::U64: case GgufValueType::I64: case GgufValueType::F64: return 8;
    case GgufValueType::STRING: case GgufValueType::ARRAY: return 0;
  }
  return 0;
}

// Smallest number of bytes one encoded value of type t can occupy (a string's length field, an
// array's element type + count); used to reject element counts that cannot fit in the file.
inline size_t min_encoded_size(GgufValueType t) {
  if (t == GgufValueType::STRING) return 8;
  if (t == GgufValueType::ARRAY) return 12;
  return scalar_size(t);
}

inline uint64_t align_up(uint64_t x, uint64_t alignment) {
  return (x + alignment - 1) / alignment * alignment;
}

inline bool is_power_of_two(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// "[64, 512]"
std::string format_dims(const int64_t* dims, size_t n_dims);

// Byte size of a tensor of `type` with `dims` (GGUF order). Throws Error naming `what` when
// dims[0] is not a multiple of the block size, a dim is < 1, or the size overflows int64.
// Sets *n_elements to the element count.
uint64_t tensor_n_bytes(const std::string& what, DType type, const int64_t* dims, size_t n_dims,
                        int64_t* n_elements);

}  // namespace specdec::gguf_detail
