// specdec/gguf.h — GGUF files: memory-mapped reader and a writer.
//
// Format (versions 2 and 3, little-endian): magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
// n_kv metadata entries (string key, u32 value type, value), n_tensors tensor infos (string
// name, u32 n_dims, u64 dims[n_dims], u32 ggml type, u64 offset relative to the data section),
// padding to `general.alignment` (default 32), then the tensor data.
// The reader validates every count, length, dimension and offset against the file size before
// using it and throws specdec::Error naming the file and the problem.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "specdec/dtype.h"

namespace specdec {

class MappedFile;

enum class GgufValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
const char* gguf_value_type_name(GgufValueType t);

class GgufArray;

// One metadata value. Arrays hold one element type (GGUF has no nested arrays of mixed types;
// nested arrays are allowed and represented recursively).
struct GgufValue {
  GgufValueType type = GgufValueType::U8;
  std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool, std::string,
               std::shared_ptr<GgufArray>, uint64_t, int64_t, double>
      value;
};

// An array's elements, all of elem_type(), stored compactly: fixed-size scalars as their bytes
// (4 bytes per F32 instead of a 48-byte GgufValue), strings back to back in one buffer with
// their end offsets, nested arrays as GgufValues. A 32,000-token vocabulary's tokens, scores
// and token types took 4.6 MB as GgufValues and take 0.6 MB so (a Llama-3 vocabulary with its
// 280,000 merges: ~8 MB instead of ~26 MB), which the engine keeps for the model's lifetime.
class GgufArray {
 public:
  explicit GgufArray(GgufValueType elem_type = GgufValueType::U8) : elem_type_(elem_type) {}

  GgufValueType elem_type() const { return elem_type_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Element i as a value (a copy; a nested array's value shares it). Requires i < size().
  GgufValue item(size_t i) const;
  // Element i of a STRING array, valid while the array lives. Requires i < size().
  std::string_view string_at(size_t i) const;

  // Appends v; throws Error when v.type (or its stored alternative) is not elem_type().
  void push_back(const GgufValue& v);
  // Appends n fixed-size scalars from their little-endian bytes (n * element size bytes; BOOL
  // bytes must be 0 or 1: the reader checks). Throws Error for STRING and ARRAY arrays.
  void append_scalar_bytes(const uint8_t* bytes, size_t n);
  // Appends one string (STRING arrays only; Error otherwise).
  void push_back_string(std::string_view s);
  void reserve(size_t n);

 private:
  GgufValueType elem_type_;
  size_t size_ = 0;
  std::vector<uint8_t> scalars_;          // fixed-size elements: (size, element bytes)
  std::string chars_;                     // STRING: the strings back to back
  std::vector<uint64_t> string_ends_;     // STRING: (size) end of string i in chars_
  std::vector<GgufValue> arrays_;         // ARRAY: the nested arrays
};

// "U32", or for arrays "ARRAY of STRING" (nested: "ARRAY of ARRAY of I32"). Cost: O(depth).
std::string gguf_value_type_description(const GgufValue& v);
// Human-readable value: numbers, "quoted" strings (escaped, long ones cut), arrays as
// [a, b, ... (N items)] showing at most max_items elements per level. For printing only.
std::string gguf_value_to_string(const GgufValue& v, size_t max_items = 8);

struct GgufTensorInfo {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> dims;   // GGUF order: dims[0] is the contiguous (innermost) dimension
  uint64_t offset = 0;         // relative to the data section
  uint64_t n_bytes = 0;        // computed from type and dims
  const uint8_t* data = nullptr;  // points into the mapping
  int64_t n_elements() const;
};

class GgufFile {
 public:
  // Maps and parses `path`. Throws Error for I/O problems and malformed files. The header's
  // pages are dropped from the mapping once parsed (metadata and tensor names are copies): a
  // 32,000-token vocabulary's ~0.8 MB would otherwise stay resident next to its copy.
  // Guarantees: every tensor's [data, data + n_bytes) lies inside the mapping, its type is known,
  // dims[0] is a multiple of the block size, offsets are multiples of alignment(); keys and
  // tensor names are unique. Cost: O(header size); tensor data is mapped, not read.
  static std::unique_ptr<GgufFile> open(const std::string& path);
  // Parses an in-memory image (not copied: `data` must outlive the object). For fuzzing/tests.
  // `name` stands for the path in error messages. Same guarantees as open().
  static std::unique_ptr<GgufFile> parse(const uint8_t* data, size_t size, const std::string& name);
  ~GgufFile();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }

  // ---- metadata
  bool has(std::string_view key) const;
  const GgufValue* find(std::string_view key) const;  // nullptr when absent
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  // Typed accessors. Integer getters accept any integer type whose value fits; float getters
  // accept F32/F64. Missing key or wrong type -> Error naming the key, the file and the type found.
  std::string get_string(std::string_view key) const;
  uint64_t get_u64(std::string_view key) const;
  int64_t get_i64(std::string_view key) const;
  uint32_t get_u32(std::string_view key) const;
  float get_f32(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;
  std::vector<int32_t> get_i32_array(std::string_view key) const;
  // Optional variants: default when absent, Error when present with a wrong type.
  uint32_t get_u32_or(std::string_view key, uint32_t fallback) const;
  float get_f32_or(std::string_view key, float fallback) const;
  bool get_bool_or(std::string_view key, bool fallback) const;
  std::string get_string_or(std::string_view key, const std::string& fallback) const;

  // ---- tensors
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;   // nullptr when absent
  const GgufTensorInfo& tensor(std::string_view name) const;        // Error when absent
  // Drops the resident pages wholly inside [p, p + n) of the mapping (MappedFile::release);
  // does nothing for a parsed in-memory image.
  void release_pages(const void* p, size_t n) const;
  // Drops the resident pages of the whole mapping except those holding a byte of some range
  // in `keep` ({first byte, length} inside the mapping, any order; MappedFile::release_all_except):
  // for a loader that goes on reading only those ranges. Nothing for a parsed in-memory image.
  void release_pages_except(std::vector<std::pair<const uint8_t*, size_t>> keep) const;

 private:
  GgufFile() = default;
  // Returns the header's size: the bytes before the tensor data section (all of them when the
  // file has no tensors). Everything parse_all keeps is a copy, so those bytes are not read again.
  uint64_t parse_all(const uint8_t* data, size_t size);

  std::string path_;
  std::unique_ptr<MappedFile> mapping_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Writes GGUF version 3. Usage: set metadata, add tensors (data copied), then write(path).
class GgufWriter {
 public:
  void set(const std::string& key, GgufValue value);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
  // dims in GGUF order (dims[0] contiguous); bytes.size() must equal the type's size for dims.
  void add_tensor(const std::string& name, DType type, const std::vector<int64_t>& dims,
                  std::vector<uint8_t> bytes);
  void add_tensor_f32(const std::string& name, const std::vector<int64_t>& dims, const float* data);
  void set_alignment(uint64_t alignment);  // also writes general.alignment when != 32
  // Serialises to memory / to a file (written to PATH.tmp then renamed). Throws Error on I/O failure.
  std::vector<uint8_t> to_bytes() const;
  void write(const std::string& path) const;

 private:
  struct Tensor { std::string name; DType type; std::vector<int64_t> dims; std::vector<uint8_t> bytes; };
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
  uint64_t alignment_ = 32;
};

}  // namespace specdec
