// tests/gguf/gguf_bytes.h — hand-building GGUF byte images for reader tests, independent of
// GgufWriter (so writer and reader bugs cannot cancel out).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace specdec::testing {

class Bytes {
 public:
  template <typename T>
  Bytes& pod(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    data.insert(data.end(), p, p + sizeof v);
    return *this;
  }
  Bytes& raw(const std::string& s) {
    data.insert(data.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& str(const std::string& s) { return pod<uint64_t>(s.size()).raw(s); }
  Bytes& pad_to(size_t alignment) {
    while (data.size() % alignment) data.push_back(0);
    return *this;
  }
  // Header: magic, version, n_tensors, n_kv.
  Bytes& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    return raw("GGUF").pod<uint32_t>(version).pod<uint64_t>(n_tensors).pod<uint64_t>(n_kv);
  }
  // Metadata entry with a U32 value.
  Bytes& kv_u32(const std::string& key, uint32_t v) { return str(key).pod<uint32_t>(4).pod(v); }
  Bytes& kv_string(const std::string& key, const std::string& v) {
    return str(key).pod<uint32_t>(8).str(v);
  }
  // Tensor info.
  Bytes& tensor(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type,
                uint64_t offset) {
    str(name).pod<uint32_t>(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) pod(d);
    return pod(type).pod(offset);
  }
  size_t size() const { return data.size(); }

  std::vector<uint8_t> data;
};

// A small valid file: 3 metadata entries (a string, a U32 array, a bool), 2 F32 tensors
// ("a" [4, 2] = 0..7 and "b" [3] = 100..102).
inline std::vector<uint8_t> small_valid_gguf(uint32_t version = 3) {
  Bytes b;
  b.header(version, 2, 3);
  b.kv_string("general.architecture", "llama");
  b.str("ids").pod<uint32_t>(9).pod<uint32_t>(4).pod<uint64_t>(3).pod<uint32_t>(7).pod<uint32_t>(8).pod<uint32_t>(9);
  b.str("flag").pod<uint32_t>(7).pod<uint8_t>(1);
  b.tensor("a", {4, 2}, 0, 0);   // 32 bytes
  b.tensor("b", {3}, 0, 32);     // 12 bytes
  b.pad_to(32);
  for (int i = 0; i < 8; ++i) b.pod<float>(static_cast<float>(i));
  for (int i = 0; i < 3; ++i) b.pod<float>(static_cast<float>(100 + i));
  return b.data;
}

}  // namespace specdec::testing
