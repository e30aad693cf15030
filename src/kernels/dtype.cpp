#include "specdec/dtype.h"

#include <cctype>
#include <string>

#include "specdec/error.h"

namespace specdec {

namespace {

struct Entry { uint32_t id; DTypeInfo info; bool weight; };

constexpr Entry kTypes[] = {
    {0, {"F32", 1, 4}, true},     {1, {"F16", 1, 2}, true},      {2, {"Q4_0", 32, 18}, true},
    {3, {"Q4_1", 32, 20}, true},  {6, {"Q5_0", 32, 22}, true},   {7, {"Q5_1", 32, 24}, true},
    {8, {"Q8_0", 32, 34}, true},  {9, {"Q8_1", 32, 36}, false},  {10, {"Q2_K", 256, 84}, true},
    {11, {"Q3_K", 256, 110}, true}, {12, {"Q4_K", 256, 144}, true}, {13, {"Q5_K", 256, 176}, true},
    {14, {"Q6_K", 256, 210}, true}, {15, {"Q8_K", 256, 292}, false}, {24, {"I8", 1, 1}, false},
    {25, {"I16", 1, 2}, false},   {26, {"I32", 1, 4}, false},    {27, {"I64", 1, 8}, false},
    {28, {"F64", 1, 8}, false},   {30, {"BF16", 1, 2}, true},
};

const Entry* find(uint32_t id) {
  for (const auto& e : kTypes)
    if (e.id == id) return &e;
  return nullptr;
}

}  // namespace

const DTypeInfo* dtype_info(uint32_t ggml_type) {
  const Entry* e = find(ggml_type);
  return e ? &e->info : nullptr;
}

const DTypeInfo& dtype_info(DType t) {
  const Entry* e = find(static_cast<uint32_t>(t));
  if (!e) throw Error("unknown tensor type " + std::to_string(static_cast<uint32_t>(t)));
  return e->info;
}

const char* dtype_name(DType t) {
  const Entry* e = find(static_cast<uint32_t>(t));
  return e ? e->info.name : "unknown";
}

DType dtype_from_name(const char* name) {
  std::string upper(name);
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string valid;
  for (const auto& e : kTypes) {
    if (!e.weight) continue;
    if (upper == e.info.name) return static_cast<DType>(e.id);
    valid += (valid.empty() ? "" : ", ") + std::string(e.info.name);
  }
  throw Error("unknown weight type '" + std::string(name) + "' (valid: " + valid + ")");
}

size_t dtype_row_bytes(DType t, int64_t n) {
  const DTypeInfo& info = dtype_info(t);
  if (n < 0 || n % info.block_size != 0)
    throw Error("row of " + std::to_string(n) + " values is not a multiple of " + info.name +
                "'s block size " + std::to_string(info.block_size));
  return static_cast<size_t>(n / info.block_size) * static_cast<size_t>(info.type_size);
}

bool dtype_is_weight_type(DType t) {
  const Entry* e = find(static_cast<uint32_t>(t));
  return e && e->weight;
}

}  // namespace specdec
