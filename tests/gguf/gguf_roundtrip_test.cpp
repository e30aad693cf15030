// GGUF writer -> reader round trips, hand-built version 2 files, typed accessors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>

#include "common/testing.h"
#include "gguf/gguf_bytes.h"
#include "specdec/error.h"
#include "specdec/gguf.h"

namespace specdec {
namespace {

using testing::Bytes;

template <typename T>
GgufValue val(GgufValueType type, T x) {
  GgufValue v;
  v.type = type;
  v.value = x;
  return v;
}

GgufValue arr(GgufValueType elem_type, std::vector<GgufValue> items) {
  auto a = std::make_shared<GgufArray>(elem_type);
  for (const GgufValue& item : items) a->push_back(item);
  GgufValue v;
  v.type = GgufValueType::ARRAY;
  v.value = std::move(a);
  return v;
}

// Structural equality (floats bitwise, so NaN payloads count too).
bool same(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type || a.value.index() != b.value.index()) return false;
  if (a.type == GgufValueType::F32) {
    float x = std::get<float>(a.value), y = std::get<float>(b.value);
    return std::memcmp(&x, &y, 4) == 0;
  }
  if (a.type == GgufValueType::F64) {
    double x = std::get<double>(a.value), y = std::get<double>(b.value);
    return std::memcmp(&x, &y, 8) == 0;
  }
  if (a.type != GgufValueType::ARRAY) return a.value == b.value;
  const auto& x = *std::get<std::shared_ptr<GgufArray>>(a.value);
  const auto& y = *std::get<std::shared_ptr<GgufArray>>(b.value);
  if (x.elem_type() != y.elem_type() || x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (!same(x.item(i), y.item(i))) return false;
  return true;
}

std::vector<std::pair<std::string, GgufValue>> every_value_type() {
  using T = GgufValueType;
  std::vector<std::pair<std::string, GgufValue>> kv;
  kv.emplace_back("u8", val(T::U8, uint8_t{250}));
  kv.emplace_back("i8", val(T::I8, int8_t{-120}));
  kv.emplace_back("u16", val(T::U16, uint16_t{65000}));
  kv.emplace_back("i16", val(T::I16, int16_t{-32000}));
  kv.emplace_back("u32", val(T::U32, uint32_t{4000000000u}));
  kv.emplace_back("i32", val(T::I32, int32_t{-2000000000}));
  kv.emplace_back("f32", val(T::F32, 3.25f));
  kv.emplace_back("f32.nan", val(T::F32, std::numeric_limits<float>::quiet_NaN()));
  kv.emplace_back("bool.t", val(T::BOOL, true));
  kv.emplace_back("bool.f", val(T::BOOL, false));
  kv.emplace_back("string", val(T::STRING, std::string("h\xc3\xa9llo \xe2\x96\x81world")));
  kv.emplace_back("string.empty", val(T::STRING, std::string()));
  kv.emplace_back("string.nul", val(T::STRING, std::string("a\0b", 3)));
  kv.emplace_back("u64", val(T::U64, std::numeric_limits<uint64_t>::max()));
  kv.emplace_back("i64", val(T::I64, std::numeric_limits<int64_t>::min()));
  kv.emplace_back("f64", val(T::F64, -1.0e300));
  kv.emplace_back("arr.u8", arr(T::U8, {val(T::U8, uint8_t{1}), val(T::U8, uint8_t{255})}));
  kv.emplace_back("arr.i64", arr(T::I64, {val(T::I64, int64_t{-5})}));
  kv.emplace_back("arr.empty", arr(T::F32, {}));
  kv.emplace_back("arr.bool", arr(T::BOOL, {val(T::BOOL, true), val(T::BOOL, false)}));
  kv.emplace_back("arr.str", arr(T::STRING, {val(T::STRING, std::string("x")),
                                             val(T::STRING, std::string())}));
  kv.emplace_back("arr.nested",
                  arr(T::ARRAY, {arr(T::I32, {val(T::I32, int32_t{1}), val(T::I32, int32_t{2})}),
                                 arr(T::I32, {}),
                                 arr(T::I32, {val(T::I32, int32_t{-3})})}));
  kv.emplace_back("arr.nested.str",
                  arr(T::ARRAY, {arr(T::ARRAY, {arr(T::STRING, {val(T::STRING, std::string("deep"))})})}));
  return kv;
}

TEST(GgufRoundTrip, EveryValueTypeSurvivesWriteAndRead) {
  GgufWriter w;
  const auto kv = every_value_type();
  for (const auto& [k, v] : kv) w.set(k, v);
  const std::vector<uint8_t> bytes = w.to_bytes();
  auto f = GgufFile::parse(bytes.data(), bytes.size(), "mem.gguf");
  EXPECT_EQ(f->version(), 3u);
  ASSERT_EQ(f->metadata().size(), kv.size());
  for (size_t i = 0; i < kv.size(); ++i) {
    EXPECT_EQ(f->metadata()[i].first, kv[i].first) << "order must be preserved";
    EXPECT_TRUE(same(f->metadata()[i].second, kv[i].second)) << kv[i].first;
  }
  EXPECT_TRUE(f->tensors().empty());
}

TEST(GgufRoundTrip, FileWriteIsAtomicAndReadable) {
  const std::string path = testing::temp_dir() + "/roundtrip.gguf";
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.context_length", 128);
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "\xe2\x96\x81the"});
  w.set_f32_array("tokenizer.ggml.scores", {0.f, -1.5f, 2.25f});
  w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 1});
  w.set_bool("b", true);
  w.set_f32("eps", 1e-5f);
  w.set_u64("big", uint64_t{1} << 40);
  w.set_i32("neg", -7);
  std::vector<float> weights(6 * 4);
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = 0.5f * static_cast<float>(i) - 3.f;
  w.add_tensor_f32("w", {6, 4}, weights.data());
  w.add_tensor("q", DType::Q8_0, {64, 2}, std::vector<uint8_t>(2 * 2 * 34, 7));
  w.add_tensor("h", DType::F16, {3}, {1, 2, 3, 4, 5, 6});
  w.write(path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(std::filesystem::file_size(path), w.to_bytes().size());

  auto f = GgufFile::open(path);
  EXPECT_EQ(f->path(), path);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_u32("llama.context_length"), 128u);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens"),
            (std::vector<std::string>{"<unk>", "<s>", "\xe2\x96\x81the"}));
  EXPECT_EQ(f->get_f32_array("tokenizer.ggml.scores"), (std::vector<float>{0.f, -1.5f, 2.25f}));
  EXPECT_EQ(f->get_i32_array("tokenizer.ggml.token_type"), (std::vector<int32_t>{2, 3, 1}));
  EXPECT_TRUE(f->get_bool("b"));
  EXPECT_EQ(f->get_f32("eps"), 1e-5f);
  EXPECT_EQ(f->get_u64("big"), uint64_t{1} << 40);
  EXPECT_EQ(f->get_i64("neg"), -7);

  ASSERT_EQ(f->tensors().size(), 3u);
  const GgufTensorInfo& t = f->tensor("w");
  EXPECT_EQ(t.type, DType::F32);
  EXPECT_EQ(t.dims, (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(t.n_elements(), 24);
  EXPECT_EQ(t.n_bytes, 96u);
  EXPECT_EQ(std::memcmp(t.data, weights.data(), 96), 0);
  const GgufTensorInfo& q = f->tensor("q");
  EXPECT_EQ(q.type, DType::Q8_0);
  EXPECT_EQ(q.n_bytes, 136u);
  EXPECT_EQ(q.data[0], 7);
  EXPECT_EQ(q.data[135], 7);
  const GgufTensorInfo& h = f->tensor("h");
  EXPECT_EQ(h.n_bytes, 6u);
  EXPECT_EQ(h.data[5], 6);
  for (const auto& ti : f->tensors()) EXPECT_EQ(ti.offset % 32, 0u) << ti.name;
  EXPECT_EQ(f->find_tensor("missing"), nullptr);
}

TEST(GgufRoundTrip, AlignmentOtherThan32) {
  for (uint64_t alignment : {1u, 8u, 64u, 4096u}) {
    GgufWriter w;
    w.set_alignment(alignment);
    w.set_string("general.name", "x");
    std::vector<float> a(5, 1.f), b(3, 2.f);  // 20 and 12 bytes: offsets need padding
    w.add_tensor_f32("a", {5}, a.data());
    w.add_tensor_f32("b", {3}, b.data());
    const auto bytes = w.to_bytes();
    auto f = GgufFile::parse(bytes.data(), bytes.size(), "aligned.gguf");
    EXPECT_EQ(f->alignment(), alignment);
    EXPECT_EQ(f->get_u32_or("general.alignment", 32), alignment);
    EXPECT_EQ(f->has("general.alignment"), alignment != 32);
    EXPECT_EQ(f->tensor("b").offset, (20 + alignment - 1) / alignment * alignment);
    // Data section starts at an aligned offset: tensor data pointer - image start is aligned.
    for (const auto& t : f->tensors())
      EXPECT_EQ(static_cast<uint64_t>(t.data - bytes.data()) % alignment, 0u) << alignment;
    EXPECT_EQ(reinterpret_cast<const float*>(f->tensor("b").data)[2], 2.f);
  }
  GgufWriter w;
  w.set_alignment(64);
  w.set_alignment(32);  // back to the default removes the key
  EXPECT_EQ(w.to_bytes().size(), 24u);
  EXPECT_THROW(w.set_alignment(48), Error);
  EXPECT_THROW(w.set_alignment(0), Error);
}

TEST(GgufRoundTrip, ReadsHandBuiltVersion2File) {
  Bytes b;
  b.header(2, 1, 3);
  b.kv_u32("general.alignment", 16);
  b.kv_string("general.architecture", "llama");
  b.str("llama.rope.freq_base").pod<uint32_t>(6).pod<float>(10000.f);
  b.tensor("t", {2, 2}, 0, 0);
  b.pad_to(16);
  const size_t data_start = b.size();
  for (float x : {1.f, 2.f, 3.f, 4.f}) b.pod(x);
  auto f = GgufFile::parse(b.data.data(), b.size(), "v2.gguf");
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->alignment(), 16u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_f32("llama.rope.freq_base"), 10000.f);
  const auto& t = f->tensor("t");
  EXPECT_EQ(t.data, b.data.data() + data_start);
  EXPECT_EQ(reinterpret_cast<const float*>(t.data)[3], 4.f);
}

TEST(GgufRoundTrip, SmallValidImageParses) {
  const auto bytes = testing::small_valid_gguf();
  auto f = GgufFile::parse(bytes.data(), bytes.size(), "small.gguf");
  EXPECT_EQ(f->get_i32_array("ids"), (std::vector<int32_t>{7, 8, 9}));
  EXPECT_TRUE(f->get_bool("flag"));
  EXPECT_EQ(reinterpret_cast<const float*>(f->tensor("b").data)[2], 102.f);
}

TEST(GgufRoundTrip, RandomTensorsAndArrays) {
  std::mt19937_64 rng(testing::test_seed("GgufRoundTrip.RandomTensorsAndArrays"));
  const DType types[] = {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q8_0,
                         DType::Q4_K, DType::Q6_K, DType::I32};
  for (int trial = 0; trial < 20; ++trial) {
    GgufWriter w;
    w.set_alignment(uint64_t{1} << (rng() % 8));
    std::vector<std::vector<uint8_t>> data;
    const int n = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < n; ++i) {
      const DType t = types[rng() % std::size(types)];
      const DTypeInfo& info = dtype_info(t);
      std::vector<int64_t> dims{info.block_size * static_cast<int64_t>(1 + rng() % 3)};
      const int extra = static_cast<int>(rng() % 4);
      for (int d = 0; d < extra; ++d) dims.push_back(1 + static_cast<int64_t>(rng() % 3));
      int64_t rows = 1;
      for (size_t d = 1; d < dims.size(); ++d) rows *= dims[d];
      std::vector<uint8_t> bytes(static_cast<size_t>(dims[0] / info.block_size * info.type_size * rows));
      for (auto& x : bytes) x = static_cast<uint8_t>(rng());
      data.push_back(bytes);
      w.add_tensor("t" + std::to_string(i), t, dims, bytes);
    }
    std::vector<float> floats(rng() % 50);
    for (auto& x : floats) x = static_cast<float>(static_cast<int64_t>(rng() % 2001) - 1000) / 7.f;
    w.set_f32_array("floats", floats);
    const auto bytes = w.to_bytes();
    auto f = GgufFile::parse(bytes.data(), bytes.size(), "random.gguf");
    ASSERT_EQ(f->tensors().size(), static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      const auto& t = f->tensors()[i];
      ASSERT_EQ(t.n_bytes, data[i].size());
      EXPECT_EQ(std::memcmp(t.data, data[i].data(), data[i].size()), 0) << t.name;
    }
    EXPECT_EQ(f->get_f32_array("floats"), floats);
  }
}

TEST(GgufAccessors, IntegerConversionsAndErrors) {
  GgufWriter w;
  using T = GgufValueType;
  w.set("u8", val(T::U8, uint8_t{200}));
  w.set("i8.neg", val(T::I8, int8_t{-1}));
  w.set("u64.big", val(T::U64, uint64_t{1} << 40));
  w.set("u64.max", val(T::U64, std::numeric_limits<uint64_t>::max()));
  w.set("f64", val(T::F64, 0.5));
  w.set("i16.arr", arr(T::I16, {val(T::I16, int16_t{-4}), val(T::I16, int16_t{9})}));
  w.set("u32.arr.big", arr(T::U32, {val(T::U32, uint32_t{3000000000u})}));
  w.set_string("s", "text");
  w.set_u32("s", 5);  // set() replaces an existing key
  const auto bytes = w.to_bytes();
  auto f = GgufFile::parse(bytes.data(), bytes.size(), "acc.gguf");

  EXPECT_EQ(f->get_u32("u8"), 200u);
  EXPECT_EQ(f->get_i64("u8"), 200);
  EXPECT_EQ(f->get_i64("i8.neg"), -1);
  EXPECT_EQ(f->get_u64("u64.big"), uint64_t{1} << 40);
  EXPECT_EQ(f->get_f32("f64"), 0.5f);
  EXPECT_EQ(f->get_i32_array("i16.arr"), (std::vector<int32_t>{-4, 9}));
  EXPECT_EQ(f->get_u32("s"), 5u);
  EXPECT_EQ(f->metadata().size(), 8u);

  auto expect_error = [&](auto&& call, std::vector<std::string> parts) {
    try {
      call();
      ADD_FAILURE() << "no error; expected one mentioning " << parts[0];
    } catch (const Error& e) {
      for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
                                      << "message: " << e.what() << "\nmissing: " << p;
    }
  };
  expect_error([&] { f->get_u32("nope"); }, {"missing", "'nope'", "acc.gguf"});
  expect_error([&] { f->get_string("u8"); }, {"'u8'", "acc.gguf", "type U8", "STRING"});
  expect_error([&] { f->get_u32("i8.neg"); }, {"'i8.neg'", "-1", "uint32"});
  expect_error([&] { f->get_u32("u64.big"); }, {"'u64.big'", "1099511627776", "uint32"});
  expect_error([&] { f->get_i64("u64.max"); }, {"18446744073709551615", "int64"});
  expect_error([&] { f->get_f32("u8"); }, {"'u8'", "F32"});
  expect_error([&] { f->get_bool("f64"); }, {"'f64'", "type F64", "BOOL"});
  expect_error([&] { f->get_string_array("i16.arr"); }, {"'i16.arr'", "ARRAY of I16", "STRING"});
  expect_error([&] { f->get_f32_array("u8"); }, {"'u8'", "type U8"});
  expect_error([&] { f->get_i32_array("u32.arr.big"); }, {"'u32.arr.big'", "3000000000", "int32"});
  expect_error([&] { f->get_u32_or("f64", 1); }, {"'f64'", "F64"});
  expect_error([&] { f->tensor("nope"); }, {"tensor 'nope'", "acc.gguf"});

  EXPECT_EQ(f->get_u32_or("absent", 77), 77u);
  EXPECT_EQ(f->get_f32_or("absent", 1.5f), 1.5f);
  EXPECT_TRUE(f->get_bool_or("absent", true));
  EXPECT_EQ(f->get_string_or("absent", "dflt"), "dflt");
  EXPECT_EQ(f->find("absent"), nullptr);
  EXPECT_NE(f->find("u8"), nullptr);
}

TEST(GgufWriterErrors, RejectsInconsistentInput) {
  GgufWriter w;
  EXPECT_THROW(w.add_tensor("a", DType::F32, {4}, std::vector<uint8_t>(15)), Error);
  EXPECT_THROW(w.add_tensor("a", DType::Q8_0, {33}, std::vector<uint8_t>(34)), Error);
  EXPECT_THROW(w.add_tensor("a", DType::F32, {}, {}), Error);
  EXPECT_THROW(w.add_tensor("a", DType::F32, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4)), Error);
  EXPECT_THROW(w.add_tensor("a", DType::F32, {0}, {}), Error);
  EXPECT_THROW(w.add_tensor("a", static_cast<DType>(99), {1}, std::vector<uint8_t>(4)), Error);
  w.add_tensor("a", DType::F32, {1}, std::vector<uint8_t>(4));
  EXPECT_THROW(w.add_tensor("a", DType::F32, {1}, std::vector<uint8_t>(4)), Error);
  GgufValue bad;
  bad.type = GgufValueType::STRING;  // but holds uint8_t
  EXPECT_THROW(w.set("k", bad), Error);
  EXPECT_THROW(w.set("k", arr(GgufValueType::U8, {val(GgufValueType::I8, int8_t{1})})), Error);
  EXPECT_THROW(w.set("general.alignment", val(GgufValueType::U64, uint64_t{64})), Error);
  EXPECT_THROW(w.write(testing::temp_dir() + "/no/such/dir/x.gguf"), Error);
}

TEST(GgufValueFormatting, AbbreviatesLongArrays) {
  std::vector<GgufValue> items;
  for (int i = 0; i < 100; ++i) items.push_back(val(GgufValueType::I32, int32_t{i}));
  const GgufValue a = arr(GgufValueType::I32, items);
  EXPECT_EQ(gguf_value_to_string(a, 3), "[0, 1, 2, ... (100 items)]");
  EXPECT_EQ(gguf_value_type_description(a), "ARRAY of I32");
  EXPECT_EQ(gguf_value_to_string(val(GgufValueType::STRING, std::string("a\"b\n"))), "\"a\\\"b\\n\"");
  EXPECT_EQ(gguf_value_to_string(val(GgufValueType::F32, 1e-5f)), "9.99999975e-06");
  EXPECT_EQ(gguf_value_to_string(val(GgufValueType::BOOL, true)), "true");
}

}  // namespace
}  // namespace specdec
