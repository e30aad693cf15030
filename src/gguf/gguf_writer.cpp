// gguf/gguf_writer.cpp — serialising GGUF version 3 (little-endian), written atomically.
//
// Layout written: header, metadata in insertion order, tensor infos in insertion order, zero
// padding to the alignment, then each tensor's bytes followed by zero padding to the alignment
// (as ggml does), so tensor offsets are multiples of the alignment.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "gguf/gguf_format.h"
#include "specdec/error.h"
#include "specdec/gguf.h"

namespace specdec {

using namespace gguf_detail;

namespace {

// Checks that a value is internally consistent (type tag == stored alternative, arrays
// homogeneous and not too deep) so that what we write can be read back.
void validate_value(const GgufValue& v, const std::string& what, int depth) {
  if (!is_known_value_type(static_cast<uint32_t>(v.type)))
    throw Error(what + ": unknown value type " + std::to_string(static_cast<uint32_t>(v.type)));
  if (v.value.index() != static_cast<size_t>(v.type))
    throw Error(what + ": value type " + gguf_value_type_name(v.type) +
                " does not match the stored C++ alternative #" + std::to_string(v.value.index()));
  if (v.type != GgufValueType::ARRAY) return;
  if (depth >= kMaxArrayDepth)
    throw Error(what + ": arrays nested deeper than " + std::to_string(kMaxArrayDepth) + " levels");
  const auto& arr = std::get<std::shared_ptr<GgufArray>>(v.value);
  if (!arr) throw Error(what + ": ARRAY value holds a null array");
  if (!is_known_value_type(static_cast<uint32_t>(arr->elem_type())))
    throw Error(what + ": unknown array element type " +
                std::to_string(static_cast<uint32_t>(arr->elem_type())));
  // GgufArray::push_back checked every item's type; nested arrays still need their depth.
  if (arr->elem_type() == GgufValueType::ARRAY)
    for (size_t i = 0; i < arr->size(); ++i) validate_value(arr->item(i), what + "[" + std::to_string(i) + "]", depth + 1);
}

class ByteOut {
 public:
  explicit ByteOut(std::vector<uint8_t>& out) : out_(out) {}
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  template <typename T>
  void pod(T v) { bytes(&v, sizeof v); }
  void string(std::string_view s) {
    pod<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void value(const GgufValue& v) {
    switch (v.type) {
      case GgufValueType::U8: pod(std::get<uint8_t>(v.value)); break;
      case GgufValueType::I8: pod(std::get<int8_t>(v.value)); break;
      case GgufValueType::U16: pod(std::get<uint16_t>(v.value)); break;
      case GgufValueType::I16: pod(std::get<int16_t>(v.value)); break;
      case GgufValueType::U32: pod(std::get<uint32_t>(v.value)); break;
      case GgufValueType::I32: pod(std::get<int32_t>(v.value)); break;
      case GgufValueType::F32: pod(std::get<float>(v.value)); break;
      case GgufValueType::U64: pod(std::get<uint64_t>(v.value)); break;
      case GgufValueType::I64: pod(std::get<int64_t>(v.value)); break;
      case GgufValueType::F64: pod(std::get<double>(v.value)); break;
      case GgufValueType::BOOL: pod<uint8_t>(std::get<bool>(v.value) ? 1 : 0); break;
      case GgufValueType::STRING: string(std::get<std::string>(v.value)); break;
      case GgufValueType::ARRAY: {
        const auto& arr = std::get<std::shared_ptr<GgufArray>>(v.value);
        pod<uint32_t>(static_cast<uint32_t>(arr->elem_type()));
        pod<uint64_t>(arr->size());
        if (arr->elem_type() == GgufValueType::STRING) {
          for (size_t i = 0; i < arr->size(); ++i) string(arr->string_at(i));
        } else {
          for (size_t i = 0; i < arr->size(); ++i) value(arr->item(i));
        }
        break;
      }
    }
  }
  void pad_to(uint64_t alignment) {
    out_.resize(static_cast<size_t>(align_up(out_.size(), alignment)), 0);
  }

 private:
  std::vector<uint8_t>& out_;
};

GgufValue array_value(std::shared_ptr<GgufArray> arr) {
  GgufValue v;
  v.type = GgufValueType::ARRAY;
  v.value = std::move(arr);
  return v;
}

template <typename T>
GgufValue scalar(GgufValueType type, T x) {
  GgufValue v;
  v.type = type;
  v.value = x;
  return v;
}

// Writes all of [p, p+n) to fd; throws naming `path` on failure.
void write_all(int fd, const uint8_t* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error("cannot write '" + path + "': " + std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  validate_value(value, "GGUF metadata key '" + key + "'", 0);
  if (key == kAlignmentKey) {
    if (value.type != GgufValueType::U32)
      throw Error(std::string(kAlignmentKey) + " must be U32, got " +
                  gguf_value_type_name(value.type));
    const uint64_t a = std::get<uint32_t>(value.value);
    if (!is_power_of_two(a) || a > kMaxAlignment)
      throw Error(std::string(kAlignmentKey) + " = " + std::to_string(a) +
                  " is not a power of two between 1 and " + std::to_string(kMaxAlignment));
    alignment_ = a;
  }
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::set_u32(const std::string& key, uint32_t v) { set(key, scalar(GgufValueType::U32, v)); }
void GgufWriter::set_i32(const std::string& key, int32_t v) { set(key, scalar(GgufValueType::I32, v)); }
void GgufWriter::set_u64(const std::string& key, uint64_t v) { set(key, scalar(GgufValueType::U64, v)); }
void GgufWriter::set_f32(const std::string& key, float v) { set(key, scalar(GgufValueType::F32, v)); }
void GgufWriter::set_bool(const std::string& key, bool v) { set(key, scalar(GgufValueType::BOOL, v)); }
void GgufWriter::set_string(const std::string& key, const std::string& v) {
  set(key, scalar(GgufValueType::STRING, v));
}

void GgufWriter::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  auto arr = std::make_shared<GgufArray>(GgufValueType::STRING);
  arr->reserve(v.size());
  for (const std::string& s : v) arr->push_back_string(s);
  set(key, array_value(std::move(arr)));
}

void GgufWriter::set_f32_array(const std::string& key, const std::vector<float>& v) {
  auto arr = std::make_shared<GgufArray>(GgufValueType::F32);
  arr->append_scalar_bytes(reinterpret_cast<const uint8_t*>(v.data()), v.size());
  set(key, array_value(std::move(arr)));
}

void GgufWriter::set_i32_array(const std::string& key, const std::vector<int32_t>& v) {
  auto arr = std::make_shared<GgufArray>(GgufValueType::I32);
  arr->append_scalar_bytes(reinterpret_cast<const uint8_t*>(v.data()), v.size());
  set(key, array_value(std::move(arr)));
}

void GgufWriter::add_tensor(const std::string& name, DType type, const std::vector<int64_t>& dims,
                            std::vector<uint8_t> bytes) {
  const std::string what = "GGUF writer: tensor '" + name + "'";
  if (dtype_info(static_cast<uint32_t>(type)) == nullptr)
    throw Error(what + " has unknown type " + std::to_string(static_cast<uint32_t>(type)));
  if (dims.empty() || dims.size() > kMaxDims)
    throw Error(what + " has " + std::to_string(dims.size()) + " dimensions (supported: 1.." +
                std::to_string(kMaxDims) + ")");
  int64_t n_elements = 0;
  const uint64_t n_bytes = tensor_n_bytes(what, type, dims.data(), dims.size(), &n_elements);
  if (bytes.size() != n_bytes)
    throw Error(what + " (" + dtype_name(type) + ", dims " + format_dims(dims.data(), dims.size()) +
                ") needs " + std::to_string(n_bytes) + " bytes, got " + std::to_string(bytes.size()));
  for (const auto& t : tensors_)
    if (t.name == name) throw Error(what + " was added twice");
  tensors_.push_back({name, type, dims, std::move(bytes)});
}

void GgufWriter::add_tensor_f32(const std::string& name, const std::vector<int64_t>& dims,
                                const float* data) {
  int64_t n_elements = 0;
  tensor_n_bytes("GGUF writer: tensor '" + name + "'", DType::F32, dims.data(), dims.size(),
                 &n_elements);
  const auto* p = reinterpret_cast<const uint8_t*>(data);
  add_tensor(name, DType::F32, dims,
             std::vector<uint8_t>(p, p + static_cast<size_t>(n_elements) * sizeof(float)));
}

void GgufWriter::set_alignment(uint64_t alignment) {
  if (!is_power_of_two(alignment) || alignment > kMaxAlignment)
    throw Error("GGUF alignment " + std::to_string(alignment) +
                " is not a power of two between 1 and " + std::to_string(kMaxAlignment));
  if (alignment != kDefaultAlignment) {
    set_u32(kAlignmentKey, static_cast<uint32_t>(alignment));
    return;
  }
  alignment_ = alignment;
  std::erase_if(kv_, [](const auto& kv) { return kv.first == kAlignmentKey; });
}

namespace {

// Everything before the tensor data: header, metadata, tensor infos, padding.
struct TensorDesc {
  const std::string* name;
  DType type;
  const std::vector<int64_t>* dims;
  uint64_t n_bytes;
};

std::vector<uint8_t> header_bytes(const std::vector<std::pair<std::string, GgufValue>>& kv,
                                  const std::vector<TensorDesc>& tensors, uint64_t alignment) {
  std::vector<uint8_t> buf;
  ByteOut out(buf);
  out.bytes(kMagic, 4);
  out.pod<uint32_t>(kWriteVersion);
  out.pod<uint64_t>(tensors.size());
  out.pod<uint64_t>(kv.size());
  for (const auto& [key, value] : kv) {
    out.string(key);
    out.pod<uint32_t>(static_cast<uint32_t>(value.type));
    out.value(value);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    out.string(*t.name);
    out.pod<uint32_t>(static_cast<uint32_t>(t.dims->size()));
    for (int64_t d : *t.dims) out.pod<uint64_t>(static_cast<uint64_t>(d));
    out.pod<uint32_t>(static_cast<uint32_t>(t.type));
    out.pod<uint64_t>(offset);
    offset = align_up(offset + t.n_bytes, alignment);
  }
  if (!tensors.empty()) out.pad_to(alignment);
  return buf;
}

}  // namespace

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<TensorDesc> descs;
  for (const auto& t : tensors_) descs.push_back({&t.name, t.type, &t.dims, t.bytes.size()});
  std::vector<uint8_t> buf = header_bytes(kv_, descs, alignment_);
  ByteOut out(buf);
  for (const auto& t : tensors_) {
    out.bytes(t.bytes.data(), t.bytes.size());
    out.pad_to(alignment_);
  }
  return buf;
}

void GgufWriter::write(const std::string& path) const {
  std::vector<TensorDesc> descs;
  for (const auto& t : tensors_) descs.push_back({&t.name, t.type, &t.dims, t.bytes.size()});
  const std::vector<uint8_t> header = header_bytes(kv_, descs, alignment_);

  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot create '" + tmp + "': " + std::strerror(errno));
  try {
    write_all(fd, header.data(), header.size(), tmp);
    const std::vector<uint8_t> zeros(static_cast<size_t>(alignment_), 0);
    for (const auto& t : tensors_) {
      write_all(fd, t.bytes.data(), t.bytes.size(), tmp);
      const uint64_t pad = align_up(t.bytes.size(), alignment_) - t.bytes.size();
      write_all(fd, zeros.data(), static_cast<size_t>(pad), tmp);
    }
    if (::fsync(fd) != 0) throw Error("cannot sync '" + tmp + "': " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot close '" + tmp + "': " + std::strerror(e));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot rename '" + tmp + "' to '" + path + "': " + std::strerror(e));
  }
}

}  // namespace specdec
