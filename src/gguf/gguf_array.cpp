// GgufArray (specdec/gguf.h): metadata arrays in compact storage.
#include <cstring>
#include <string>

#include "gguf/gguf_format.h"
#include "specdec/error.h"
#include "specdec/gguf.h"

namespace specdec {

using gguf_detail::scalar_size;

namespace {

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
void store(std::vector<uint8_t>& out, T v) {
  const auto* b = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), b, b + sizeof v);
}

}  // namespace

GgufValue GgufArray::item(size_t i) const {
  if (i >= size_)
    throw Error("GGUF array: item " + std::to_string(i) + " of " + std::to_string(size_));
  GgufValue v;
  v.type = elem_type_;
  const uint8_t* p = scalars_.data() + i * scalar_size(elem_type_);
  switch (elem_type_) {
    case GgufValueType::U8: v.value = load<uint8_t>(p); break;
    case GgufValueType::I8: v.value = load<int8_t>(p); break;
    case GgufValueType::U16: v.value = load<uint16_t>(p); break;
    case GgufValueType::I16: v.value = load<int16_t>(p); break;
    case GgufValueType::U32: v.value = load<uint32_t>(p); break;
    case GgufValueType::I32: v.value = load<int32_t>(p); break;
    case GgufValueType::F32: v.value = load<float>(p); break;
    case GgufValueType::U64: v.value = load<uint64_t>(p); break;
    case GgufValueType::I64: v.value = load<int64_t>(p); break;
    case GgufValueType::F64: v.value = load<double>(p); break;
    case GgufValueType::BOOL: v.value = *p != 0; break;
    case GgufValueType::STRING: v.value = std::string(string_at(i)); break;
    case GgufValueType::ARRAY: v = arrays_[i]; break;
  }
  return v;
}

std::string_view GgufArray::string_at(size_t i) const {
  if (elem_type_ != GgufValueType::STRING || i >= size_)
    throw Error("GGUF array: string " + std::to_string(i) + " of an ARRAY of " + gguf_value_type_name(elem_type_) +
                " with " + std::to_string(size_) + " items");
  const uint64_t begin = i == 0 ? 0 : string_ends_[i - 1];
  return std::string_view(chars_).substr(begin, string_ends_[i] - begin);
}

void GgufArray::push_back(const GgufValue& v) {
  if (v.type != elem_type_ || v.value.index() != static_cast<size_t>(v.type))
    throw Error(std::string("GGUF array: an item of type ") + gguf_value_type_name(v.type) + " in an ARRAY of " +
                gguf_value_type_name(elem_type_));
  switch (elem_type_) {
    case GgufValueType::U8: store(scalars_, std::get<uint8_t>(v.value)); break;
    case GgufValueType::I8: store(scalars_, std::get<int8_t>(v.value)); break;
    case GgufValueType::U16: store(scalars_, std::get<uint16_t>(v.value)); break;
    case GgufValueType::I16: store(scalars_, std::get<int16_t>(v.value)); break;
    case GgufValueType::U32: store(scalars_, std::get<uint32_t>(v.value)); break;
    case GgufValueType::I32: store(scalars_, std::get<int32_t>(v.value)); break;
    case GgufValueType::F32: store(scalars_, std::get<float>(v.value)); break;
    case GgufValueType::U64: store(scalars_, std::get<uint64_t>(v.value)); break;
    case GgufValueType::I64: store(scalars_, std::get<int64_t>(v.value)); break;
    case GgufValueType::F64: store(scalars_, std::get<double>(v.value)); break;
    case GgufValueType::BOOL: store<uint8_t>(scalars_, std::get<bool>(v.value) ? 1 : 0); break;
    case GgufValueType::STRING: push_back_string(std::get<std::string>(v.value)); return;
    case GgufValueType::ARRAY:
      if (!std::get<std::shared_ptr<GgufArray>>(v.value)) throw Error("GGUF array: a null nested array");
      arrays_.push_back(v);
      break;
  }
  ++size_;
}

void GgufArray::append_scalar_bytes(const uint8_t* bytes, size_t n) {
  const size_t elem_bytes = scalar_size(elem_type_);
  if (elem_bytes == 0)
    throw Error(std::string("GGUF array: scalar bytes appended to an ARRAY of ") + gguf_value_type_name(elem_type_));
  scalars_.insert(scalars_.end(), bytes, bytes + n * elem_bytes);
  size_ += n;
}

void GgufArray::push_back_string(std::string_view s) {
  if (elem_type_ != GgufValueType::STRING)
    throw Error(std::string("GGUF array: a STRING item in an ARRAY of ") + gguf_value_type_name(elem_type_));
  chars_.append(s);
  string_ends_.push_back(chars_.size());
  ++size_;
}

void GgufArray::reserve(size_t n) {
  switch (elem_type_) {
    case GgufValueType::STRING: string_ends_.reserve(n); break;
    case GgufValueType::ARRAY: arrays_.reserve(n); break;
    default: scalars_.reserve(n * scalar_size(elem_type_)); break;
  }
}

}  // namespace specdec
