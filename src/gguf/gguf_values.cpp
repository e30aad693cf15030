// gguf/gguf_values.cpp — metadata lookup, typed accessors, value formatting and tensor sizes.
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <string>

#include "gguf/gguf_format.h"
#include "specdec/error.h"
#include "specdec/gguf.h"

namespace specdec {

using namespace gguf_detail;

const char* gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: return "U8";
    case GgufValueType::I8: return "I8";
    case GgufValueType::U16: return "U16";
    case GgufValueType::I16: return "I16";
    case GgufValueType::U32: return "U32";
    case GgufValueType::I32: return "I32";
    case GgufValueType::F32: return "F32";
    case GgufValueType::BOOL: return "BOOL";
    case GgufValueType::STRING: return "STRING";
    case GgufValueType::ARRAY: return "ARRAY";
    case GgufValueType::U64: return "U64";
    case GgufValueType::I64: return "I64";
    case GgufValueType::F64: return "F64";
  }
  return "UNKNOWN";
}

std::string gguf_value_type_description(const GgufValue& v) {
  if (v.type != GgufValueType::ARRAY) return gguf_value_type_name(v.type);
  const auto* arr = std::get_if<std::shared_ptr<GgufArray>>(&v.value);
  if (!arr || !*arr) return "ARRAY";
  GgufValue elem;
  elem.type = (*arr)->elem_type();
  if (elem.type == GgufValueType::ARRAY && !(*arr)->empty()) elem = (*arr)->item(0);
  return "ARRAY of " + gguf_value_type_description(elem);
}

namespace {

std::string quote(std::string_view s, size_t max_chars) {
  std::string out = "\"";
  size_t n = 0;
  for (unsigned char c : s) {
    if (n++ == max_chars) {
      out += "...";
      break;
    }
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 32 || c == 127) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);  // UTF-8 bytes pass through
    }
  }
  return out + "\"";
}

std::string format_double(double d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", d);
  return buf;
}

// Integer view of an integer-typed value.
struct IntValue {
  bool negative = false;
  uint64_t magnitude = 0;  // |value|
};

bool integer_of(const GgufValue& v, IntValue* out) {
  auto set_signed = [&](int64_t s) {
    out->negative = s < 0;
    out->magnitude = s < 0 ? uint64_t{0} - static_cast<uint64_t>(s) : static_cast<uint64_t>(s);
  };
  switch (v.type) {
    case GgufValueType::U8: out->magnitude = std::get<uint8_t>(v.value); return true;
    case GgufValueType::U16: out->magnitude = std::get<uint16_t>(v.value); return true;
    case GgufValueType::U32: out->magnitude = std::get<uint32_t>(v.value); return true;
    case GgufValueType::U64: out->magnitude = std::get<uint64_t>(v.value); return true;
    case GgufValueType::I8: set_signed(std::get<int8_t>(v.value)); return true;
    case GgufValueType::I16: set_signed(std::get<int16_t>(v.value)); return true;
    case GgufValueType::I32: set_signed(std::get<int32_t>(v.value)); return true;
    case GgufValueType::I64: set_signed(std::get<int64_t>(v.value)); return true;
    default: return false;
  }
}

bool is_integer_type(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::U16:
    case GgufValueType::I16: case GgufValueType::U32: case GgufValueType::I32:
    case GgufValueType::U64: case GgufValueType::I64: return true;
    default: return false;
  }
}

std::string int_text(const IntValue& iv) {
  return (iv.negative ? "-" : "") + std::to_string(iv.magnitude);
}

// Converts an integer value to [lo, hi] or throws naming `what` (key and file).
int64_t checked_signed(const GgufValue& v, int64_t lo, int64_t hi, const std::string& what,
                       const char* target) {
  IntValue iv;
  if (!integer_of(v, &iv))
    throw Error(what + " has type " + gguf_value_type_description(v) + ", expected an integer");
  const bool fits = iv.negative ? iv.magnitude <= uint64_t{0} - static_cast<uint64_t>(lo)
                                : iv.magnitude <= static_cast<uint64_t>(hi);
  if (!fits) throw Error(what + " = " + int_text(iv) + " does not fit in " + target);
  return iv.negative ? static_cast<int64_t>(uint64_t{0} - iv.magnitude)
                     : static_cast<int64_t>(iv.magnitude);
}

uint64_t checked_unsigned(const GgufValue& v, uint64_t hi, const std::string& what,
                          const char* target) {
  IntValue iv;
  if (!integer_of(v, &iv))
    throw Error(what + " has type " + gguf_value_type_description(v) + ", expected an integer");
  if (iv.negative || iv.magnitude > hi)
    throw Error(what + " = " + int_text(iv) + " does not fit in " + target);
  return iv.magnitude;
}

double checked_float(const GgufValue& v, const std::string& what) {
  if (v.type == GgufValueType::F32) return std::get<float>(v.value);
  if (v.type == GgufValueType::F64) return std::get<double>(v.value);
  throw Error(what + " has type " + gguf_value_type_description(v) + ", expected F32 or F64");
}

const GgufArray& checked_array(const GgufValue& v, const std::string& what, const char* expected) {
  const auto* arr = std::get_if<std::shared_ptr<GgufArray>>(&v.value);
  if (v.type != GgufValueType::ARRAY || !arr || !*arr)
    throw Error(what + " has type " + gguf_value_type_description(v) + ", expected " + expected);
  return **arr;
}

}  // namespace

std::string gguf_value_to_string(const GgufValue& v, size_t max_items) {
  switch (v.type) {
    case GgufValueType::U8: return std::to_string(std::get<uint8_t>(v.value));
    case GgufValueType::I8: return std::to_string(std::get<int8_t>(v.value));
    case GgufValueType::U16: return std::to_string(std::get<uint16_t>(v.value));
    case GgufValueType::I16: return std::to_string(std::get<int16_t>(v.value));
    case GgufValueType::U32: return std::to_string(std::get<uint32_t>(v.value));
    case GgufValueType::I32: return std::to_string(std::get<int32_t>(v.value));
    case GgufValueType::U64: return std::to_string(std::get<uint64_t>(v.value));
    case GgufValueType::I64: return std::to_string(std::get<int64_t>(v.value));
    case GgufValueType::F32: return format_double(std::get<float>(v.value));
    case GgufValueType::F64: return format_double(std::get<double>(v.value));
    case GgufValueType::BOOL: return std::get<bool>(v.value) ? "true" : "false";
    case GgufValueType::STRING: return quote(std::get<std::string>(v.value), 200);
    case GgufValueType::ARRAY: {
      const auto& arr = std::get<std::shared_ptr<GgufArray>>(v.value);
      if (!arr) return "[]";
      std::string out = "[";
      const size_t n = arr->size();
      for (size_t i = 0; i < n && i < max_items; ++i)
        out += (i ? ", " : "") + gguf_value_to_string(arr->item(i), max_items);
      if (n > max_items) out += ", ... (" + std::to_string(n) + " items)";
      return out + "]";
    }
  }
  return "?";
}

namespace gguf_detail {

std::string format_dims(const int64_t* dims, size_t n_dims) {
  std::string out = "[";
  for (size_t i = 0; i < n_dims; ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

uint64_t tensor_n_bytes(const std::string& what, DType type, const int64_t* dims, size_t n_dims,
                        int64_t* n_elements) {
  const DTypeInfo& info = dtype_info(type);
  const int64_t max = std::numeric_limits<int64_t>::max();
  int64_t n = 1;
  for (size_t i = 0; i < n_dims; ++i) {
    if (dims[i] < 1)
      throw Error(what + ": dimension " + std::to_string(i) + " = " + std::to_string(dims[i]) +
                  " must be at least 1");
    if (n > max / dims[i])
      throw Error(what + ": dimensions " + format_dims(dims, n_dims) +
                  " overflow a 64-bit element count");
    n *= dims[i];
  }
  if (n_dims == 0 || dims[0] % info.block_size != 0)
    throw Error(what + ": row length " + (n_dims ? std::to_string(dims[0]) : std::string("?")) +
                " is not a multiple of " + info.name + "'s block size " +
                std::to_string(info.block_size));
  const int64_t n_blocks = n / info.block_size;
  if (n_blocks > max / info.type_size)
    throw Error(what + ": " + info.name + " tensor with dimensions " + format_dims(dims, n_dims) +
                " is larger than 2^63 bytes");
  *n_elements = n;
  return static_cast<uint64_t>(n_blocks) * static_cast<uint64_t>(info.type_size);
}

}  // namespace gguf_detail

int64_t GgufTensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// ---- GgufFile metadata access

bool GgufFile::has(std::string_view key) const { return kv_index_.find(key) != kv_index_.end(); }

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

namespace {

std::string key_text(std::string_view key, const std::string& path) {
  return "metadata key '" + std::string(key) + "' in '" + path + "'";
}

const GgufValue& require(const GgufFile& f, std::string_view key) {
  const GgufValue* v = f.find(key);
  if (!v) throw Error("missing " + key_text(key, f.path()));
  return *v;
}

}  // namespace

std::string GgufFile::get_string(std::string_view key) const {
  const GgufValue& v = require(*this, key);
  if (v.type != GgufValueType::STRING)
    throw Error(key_text(key, path_) + " has type " + gguf_value_type_description(v) +
                ", expected STRING");
  return std::get<std::string>(v.value);
}

uint64_t GgufFile::get_u64(std::string_view key) const {
  return checked_unsigned(require(*this, key), std::numeric_limits<uint64_t>::max(),
                          key_text(key, path_), "uint64");
}

int64_t GgufFile::get_i64(std::string_view key) const {
  return checked_signed(require(*this, key), std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max(), key_text(key, path_), "int64");
}

uint32_t GgufFile::get_u32(std::string_view key) const {
  return static_cast<uint32_t>(checked_unsigned(
      require(*this, key), std::numeric_limits<uint32_t>::max(), key_text(key, path_), "uint32"));
}

float GgufFile::get_f32(std::string_view key) const {
  return static_cast<float>(checked_float(require(*this, key), key_text(key, path_)));
}

bool GgufFile::get_bool(std::string_view key) const {
  const GgufValue& v = require(*this, key);
  if (v.type != GgufValueType::BOOL)
    throw Error(key_text(key, path_) + " has type " + gguf_value_type_description(v) +
                ", expected BOOL");
  return std::get<bool>(v.value);
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const std::string what = key_text(key, path_);
  const GgufArray& arr = checked_array(require(*this, key), what, "ARRAY of STRING");
  if (arr.elem_type() != GgufValueType::STRING)
    throw Error(what + " is an ARRAY of " + gguf_value_type_name(arr.elem_type()) +
                ", expected ARRAY of STRING");
  std::vector<std::string> out;
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) out.emplace_back(arr.string_at(i));
  return out;
}

std::vector<float> GgufFile::get_f32_array(std::string_view key) const {
  const std::string what = key_text(key, path_);
  const GgufArray& arr = checked_array(require(*this, key), what, "ARRAY of F32");
  if (arr.elem_type() != GgufValueType::F32 && arr.elem_type() != GgufValueType::F64)
    throw Error(what + " is an ARRAY of " + gguf_value_type_name(arr.elem_type()) +
                ", expected ARRAY of F32 or F64");
  std::vector<float> out;
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) out.push_back(static_cast<float>(checked_float(arr.item(i), what)));
  return out;
}

std::vector<int32_t> GgufFile::get_i32_array(std::string_view key) const {
  const std::string what = key_text(key, path_);
  const GgufArray& arr = checked_array(require(*this, key), what, "ARRAY of I32");
  if (!is_integer_type(arr.elem_type()))
    throw Error(what + " is an ARRAY of " + gguf_value_type_name(arr.elem_type()) +
                ", expected an ARRAY of integers");
  std::vector<int32_t> out;
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    IntValue iv;
    integer_of(arr.item(i), &iv);
    const bool fits = iv.negative ? iv.magnitude <= uint64_t{1} << 31 : iv.magnitude < uint64_t{1} << 31;
    if (!fits)
      throw Error(what + " item " + std::to_string(i) + " = " + int_text(iv) +
                  " does not fit in int32");
    out.push_back(iv.negative ? static_cast<int32_t>(-static_cast<int64_t>(iv.magnitude))
                              : static_cast<int32_t>(iv.magnitude));
  }
  return out;
}

uint32_t GgufFile::get_u32_or(std::string_view key, uint32_t fallback) const {
  return has(key) ? get_u32(key) : fallback;
}

float GgufFile::get_f32_or(std::string_view key, float fallback) const {
  return has(key) ? get_f32(key) : fallback;
}

bool GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  return has(key) ? get_bool(key) : fallback;
}

std::string GgufFile::get_string_or(std::string_view key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}

// ---- tensors

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::tensor(std::string_view name) const {
  const GgufTensorInfo* t = find_tensor(name);
  if (!t) throw Error("tensor '" + std::string(name) + "' not found in '" + path_ + "'");
  return *t;
}

}  // namespace specdec
