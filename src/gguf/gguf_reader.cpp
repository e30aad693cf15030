// gguf/gguf_reader.cpp — parsing a GGUF image (versions 2 and 3, little-endian).
//
// Every count, length, dimension and offset is checked against the bytes that remain before it
// is used to allocate or index, so a malformed or hostile file ends in specdec::Error (naming
// the file, the offset and the offending value), never in a crash or a huge allocation.
#include <bit>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "gguf/gguf_format.h"
#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/mmap_file.h"

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader assumes a little-endian host");

namespace specdec {

using namespace gguf_detail;

namespace {

// Reads little-endian fields from [data, data + size) with bounds checks. `name_` is the file
// name used in error messages.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& name)
      : data_(data), size_(size), name_(name) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  [[noreturn]] void fail(const std::string& message) const {
    throw Error("GGUF file '" + name_ + "': " + message);
  }

  // guarantees: n bytes are readable at pos(), or Error ("truncated") naming prefix + what.
  // The description is only assembled on failure, so hot loops pay nothing for it.
  void need(size_t n, const char* prefix, const std::string& what) const {
    if (n > remaining())
      fail("truncated while reading " + std::string(prefix) + what + " at offset " +
           std::to_string(pos_) + ": needs " + std::to_string(n) + " bytes, only " +
           std::to_string(remaining()) + " left (file size " + std::to_string(size_) + ")");
  }

  template <typename T>
  T read(const char* prefix, const std::string& what) {
    need(sizeof(T), prefix, what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  template <typename T>
  T read(const std::string& what) { return read<T>("", what); }

  // u64 length + bytes. The length is checked against the remaining bytes before allocating.
  // The view points into the image.
  std::string_view read_string_view(const std::string& what) {
    const uint64_t len = read<uint64_t>("length of ", what);
    if (len > remaining())
      fail("string length " + std::to_string(len) + " of " + what + " at offset " +
           std::to_string(pos_ - 8) + " exceeds the " + std::to_string(remaining()) +
           " bytes left in the file (file size " + std::to_string(size_) + ")");
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }
  std::string read_string(const std::string& what) { return std::string(read_string_view(what)); }

  // n bytes at pos() (checked), then skips them.
  const uint8_t* take(size_t n, const std::string& what) {
    need(n, "", what);
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& name_;
};

// Reads metadata values; tracks the total number of array items read so far.
class ValueReader {
 public:
  explicit ValueReader(Cursor& cur) : cur_(cur) {}

  GgufValueType read_type(const std::string& what) {
    const size_t at = cur_.pos();
    const uint32_t raw = cur_.read<uint32_t>("value type of ", what);
    if (!is_known_value_type(raw))
      cur_.fail("unknown metadata value type " + std::to_string(raw) + " for " + what +
                " at offset " + std::to_string(at) + " (valid: 0..12)");
    return static_cast<GgufValueType>(raw);
  }

  GgufValue read_value(GgufValueType type, const std::string& what, int depth) {
    GgufValue v;
    v.type = type;
    switch (type) {
      case GgufValueType::U8: v.value = cur_.read<uint8_t>(what); break;
      case GgufValueType::I8: v.value = cur_.read<int8_t>(what); break;
      case GgufValueType::U16: v.value = cur_.read<uint16_t>(what); break;
      case GgufValueType::I16: v.value = cur_.read<int16_t>(what); break;
      case GgufValueType::U32: v.value = cur_.read<uint32_t>(what); break;
      case GgufValueType::I32: v.value = cur_.read<int32_t>(what); break;
      case GgufValueType::F32: v.value = cur_.read<float>(what); break;
      case GgufValueType::U64: v.value = cur_.read<uint64_t>(what); break;
      case GgufValueType::I64: v.value = cur_.read<int64_t>(what); break;
      case GgufValueType::F64: v.value = cur_.read<double>(what); break;
      case GgufValueType::BOOL: {
        const size_t at = cur_.pos();
        const uint8_t b = cur_.read<uint8_t>(what);
        if (b > 1)
          cur_.fail("bool value " + std::to_string(b) + " of " + what + " at offset " +
                    std::to_string(at) + " is neither 0 nor 1");
        v.value = (b == 1);
        break;
      }
      case GgufValueType::STRING: v.value = cur_.read_string(what); break;
      case GgufValueType::ARRAY: v.value = read_array(what, depth); break;
    }
    return v;
  }

 private:
  std::shared_ptr<GgufArray> read_array(const std::string& what, int depth) {
    if (depth >= kMaxArrayDepth)
      cur_.fail(what + " nests arrays deeper than " + std::to_string(kMaxArrayDepth) + " levels");
    const GgufValueType elem_type = read_type("elements of " + what);
    auto arr = std::make_shared<GgufArray>(elem_type);
    const size_t count_at = cur_.pos();
    const uint64_t count = cur_.read<uint64_t>("element count of ", what);
    const size_t min_size = min_encoded_size(elem_type);
    // Validate the count before reserving: every element needs at least min_size bytes.
    if (count > kMaxArrayLength)
      cur_.fail("array " + what + " at offset " + std::to_string(count_at) + " claims " +
                std::to_string(count) + " elements of type " + gguf_value_type_name(elem_type) +
                ", more than the limit of " + std::to_string(kMaxArrayLength));
    if (min_size > 0 && count > cur_.remaining() / min_size)
      cur_.fail("array " + what + " at offset " + std::to_string(count_at) + " claims " +
                std::to_string(count) + " elements of type " +
                gguf_value_type_name(elem_type) + ", more than the " +
                std::to_string(cur_.remaining()) + " bytes left in the file can hold");
    total_items_ += count;
    if (total_items_ > kMaxTotalArrayItems)
      cur_.fail("arrays hold more than " + std::to_string(kMaxTotalArrayItems) +
                " elements in total (at " + what + ")");
    arr->reserve(static_cast<size_t>(count));
    const std::string elem_what = "an element of " + what;
    if (const size_t elem_bytes = scalar_size(elem_type); elem_bytes > 0) {  // fixed size: one copy
      const size_t at = cur_.pos();
      const uint8_t* bytes = cur_.take(static_cast<size_t>(count) * elem_bytes, elem_what);
      if (elem_type == GgufValueType::BOOL) {
        for (uint64_t i = 0; i < count; ++i)
          if (bytes[i] > 1)
            cur_.fail("bool value " + std::to_string(bytes[i]) + " of " + elem_what + " at offset " +
                      std::to_string(at + i) + " is neither 0 nor 1");
      }
      arr->append_scalar_bytes(bytes, static_cast<size_t>(count));
    } else if (elem_type == GgufValueType::STRING) {
      for (uint64_t i = 0; i < count; ++i) arr->push_back_string(cur_.read_string_view(elem_what));
    } else {
      for (uint64_t i = 0; i < count; ++i) arr->push_back(read_value(elem_type, elem_what, depth + 1));
    }
    return arr;
  }

  Cursor& cur_;
  uint64_t total_items_ = 0;
};

}  // namespace

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  auto mapping = std::make_unique<MappedFile>(path);
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = path;
  const uint64_t header_bytes = file->parse_all(mapping->data(), mapping->size());
  file->mapping_ = std::move(mapping);
  file->release_pages(file->mapping_->data(), static_cast<size_t>(header_bytes));
  return file;
}

std::unique_ptr<GgufFile> GgufFile::parse(const uint8_t* data, size_t size, const std::string& name) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = name;
  (void)file->parse_all(data, size);
  return file;
}

GgufFile::~GgufFile() = default;

uint64_t GgufFile::parse_all(const uint8_t* data, size_t size) {
  Cursor cur(data, size, path_);
  if (size == 0) cur.fail("file is empty (0 bytes), expected a GGUF header");

  // ---- header
  cur.need(4, "", "magic");
  if (std::memcmp(data, kMagic, 4) != 0) {
    std::string got;
    for (size_t i = 0; i < 4 && i < size; ++i) {
      const unsigned char c = data[i];
      got += (c >= 32 && c < 127) ? std::string(1, static_cast<char>(c))
                                  : "\\x" + std::string(1, "0123456789abcdef"[c >> 4]) +
                                        "0123456789abcdef"[c & 15];
    }
    cur.fail("bad magic '" + got + "', expected 'GGUF' (not a GGUF file)");
  }
  cur.read<uint32_t>("magic");
  version_ = cur.read<uint32_t>("version");
  if (version_ == 1)
    cur.fail("GGUF version 1 is not supported (it uses 32-bit counts); re-convert the model "
             "with a current tool to get version 2 or 3");
  if (version_ == 0x02000000u || version_ == 0x03000000u)
    cur.fail("big-endian GGUF files are not supported (version field reads " +
             std::to_string(version_) + ")");
  if (version_ != 2 && version_ != 3)
    cur.fail("unsupported GGUF version " + std::to_string(version_) + " (supported: 2, 3)");

  const uint64_t n_tensors = cur.read<uint64_t>("tensor count");
  const uint64_t n_kv = cur.read<uint64_t>("metadata entry count");
  // A metadata entry needs >= 13 bytes (key length, type, 1-byte value); a tensor info >= 24.
  auto check_count = [&](uint64_t count, uint64_t limit, uint64_t min_bytes, const char* what) {
    if (count > limit)
      cur.fail(std::string(what) + " " + std::to_string(count) + " is absurd (limit " +
               std::to_string(limit) + ")");
    if (count > cur.remaining() / min_bytes)
      cur.fail(std::string(what) + " " + std::to_string(count) + " cannot fit in the " +
               std::to_string(cur.remaining()) + " bytes left after the header (each needs at least " +
               std::to_string(min_bytes) + "; file truncated?)");
  };
  check_count(n_kv, kMaxMetadataEntries, 13, "metadata entry count");
  check_count(n_tensors, kMaxTensors, 24, "tensor count");

  // ---- metadata
  ValueReader values(cur);
  kv_.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string entry = "metadata entry #" + std::to_string(i);
    std::string key = cur.read_string("key of " + entry);
    const std::string what = "value of '" + key + "' (" + entry + ")";
    const GgufValueType type = values.read_type(what);
    GgufValue value = values.read_value(type, what, 0);
    if (kv_index_.count(key)) cur.fail("duplicate metadata key '" + key + "'");
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(std::move(key), std::move(value));
  }

  if (const GgufValue* a = find(kAlignmentKey)) {
    if (a->type != GgufValueType::U32)
      cur.fail(std::string(kAlignmentKey) + " has type " + gguf_value_type_name(a->type) +
               ", expected U32");
    alignment_ = std::get<uint32_t>(a->value);
    if (!is_power_of_two(alignment_) || alignment_ > kMaxAlignment)
      cur.fail(std::string(kAlignmentKey) + " = " + std::to_string(alignment_) +
               " is not a power of two between 1 and " + std::to_string(kMaxAlignment));
  }

  // ---- tensor infos
  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = cur.read_string("name of tensor #" + std::to_string(i));
    const std::string what = "tensor '" + t.name + "' (#" + std::to_string(i) + ")";
    const size_t dims_at = cur.pos();
    const uint32_t n_dims = cur.read<uint32_t>("dimension count of " + what);
    if (n_dims < 1 || n_dims > kMaxDims)
      cur.fail(what + " at offset " + std::to_string(dims_at) + " has " + std::to_string(n_dims) +
               " dimensions (supported: 1.." + std::to_string(kMaxDims) + ")");
    t.dims.resize(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = cur.read<uint64_t>("dimension " + std::to_string(d) + " of " + what);
      if (dim < 1 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        cur.fail(what + " has dimension " + std::to_string(d) + " = " + std::to_string(dim) +
                 " (must be between 1 and 2^63-1)");
      t.dims[d] = static_cast<int64_t>(dim);
    }
    const size_t type_at = cur.pos();
    const uint32_t raw_type = cur.read<uint32_t>("type of " + what);
    if (dtype_info(raw_type) == nullptr)
      cur.fail(what + " has unknown tensor type " + std::to_string(raw_type) + " at offset " +
               std::to_string(type_at));
    t.type = static_cast<DType>(raw_type);
    t.offset = cur.read<uint64_t>("data offset of " + what);
    if (t.offset % alignment_ != 0)
      cur.fail(what + " has data offset " + std::to_string(t.offset) +
               ", not a multiple of the alignment " + std::to_string(alignment_));
    int64_t n_elements = 0;
    t.n_bytes = tensor_n_bytes("GGUF file '" + path_ + "': " + what, t.type, t.dims.data(),
                               t.dims.size(), &n_elements);
    if (tensor_index_.count(t.name)) cur.fail("duplicate tensor name '" + t.name + "'");
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // ---- data section: starts at the next multiple of the alignment after the header.
  if (tensors_.empty()) return cur.pos();
  const uint64_t data_start = align_up(cur.pos(), alignment_);
  if (data_start > size)
    cur.fail("truncated: the tensor data section should start at offset " +
             std::to_string(data_start) + " but the file has only " + std::to_string(size) +
             " bytes");
  const uint64_t data_size = size - data_start;
  for (auto& t : tensors_) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset)
      cur.fail("tensor '" + t.name + "' (" + dtype_name(t.type) + ", dims " +
               format_dims(t.dims.data(), t.dims.size()) + ", " + std::to_string(t.n_bytes) +
               " bytes at data offset " + std::to_string(t.offset) +
               ") extends past the end of the file: the data section has " +
               std::to_string(data_size) + " bytes (file truncated?)");
    t.data = data + data_start + t.offset;
  }
  return data_start;
}

void GgufFile::release_pages(const void* p, size_t n) const {
  if (mapping_) mapping_->release(p, n);
}

void GgufFile::release_pages_except(std::vector<std::pair<const uint8_t*, size_t>> keep) const {
  if (mapping_) mapping_->release_all_except(std::move(keep));
}

}  // namespace specdec
