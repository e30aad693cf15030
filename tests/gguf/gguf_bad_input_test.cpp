// Malformed GGUF images: each must end in specdec::Error with a message naming the problem.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "common/testing.h"
#include "gguf/gguf_bytes.h"
#include "specdec/error.h"
#include "specdec/gguf.h"

namespace specdec {
namespace {

using testing::Bytes;

// Parses `bytes` and expects an Error whose message contains every string of `parts`.
void expect_parse_error(const std::vector<uint8_t>& bytes, const std::vector<std::string>& parts) {
  try {
    GgufFile::parse(bytes.data(), bytes.size(), "bad.gguf");
    ADD_FAILURE() << "parsed without error; expected a message with '" << parts.front() << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bad.gguf"), std::string::npos) << "message must name the file: " << msg;
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nmissing: " << p;
  }
}

// A file with one F32 tensor "t" of `dims` at `offset`, `data_bytes` bytes of data.
std::vector<uint8_t> one_tensor(const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset,
                                size_t data_bytes) {
  Bytes b;
  b.header(3, 1, 0);
  b.tensor("t", dims, type, offset);
  b.pad_to(32);
  b.data.resize(b.size() + data_bytes, 0);
  return b.data;
}

TEST(GgufBadInput, EmptyFile) {
  expect_parse_error({}, {"empty"});
  const std::string path = testing::temp_dir() + "/empty.gguf";
  std::ofstream(path).close();
  try {
    GgufFile::open(path);
    ADD_FAILURE() << "empty file opened";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos) << e.what();
  }
}

TEST(GgufBadInput, MissingFileNamesPath) {
  try {
    GgufFile::open("/nonexistent/dir/model.gguf");
    ADD_FAILURE() << "opened a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/model.gguf"), std::string::npos);
  }
}

TEST(GgufBadInput, EveryTruncationIsAnError) {
  const auto full = testing::small_valid_gguf();
  ASSERT_NO_THROW(GgufFile::parse(full.data(), full.size(), "full.gguf"));
  for (size_t n = 0; n < full.size(); ++n) {
    const std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<ptrdiff_t>(n));
    try {
      GgufFile::parse(prefix.data(), prefix.size(), "bad.gguf");
      ADD_FAILURE() << "prefix of " << n << " of " << full.size() << " bytes parsed";
    } catch (const Error& e) {
      const std::string msg = e.what();
      const bool says_why = msg.find("truncated") != std::string::npos ||
                            msg.find("empty") != std::string::npos ||
                            msg.find("past the end") != std::string::npos ||
                            msg.find("exceeds") != std::string::npos ||
                            msg.find("more than") != std::string::npos ||
                            msg.find("cannot fit") != std::string::npos;
      EXPECT_TRUE(says_why) << "prefix " << n << ": " << msg;
    }
  }
}

TEST(GgufBadInput, WrongMagic) {
  auto bytes = testing::small_valid_gguf();
  bytes[0] = 'g';
  expect_parse_error(bytes, {"magic", "not a GGUF file"});
  std::vector<uint8_t> elf = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
  expect_parse_error(elf, {"magic", "\\x7fELF"});
}

TEST(GgufBadInput, UnsupportedVersions) {
  expect_parse_error(testing::small_valid_gguf(1), {"version 1", "not supported"});
  expect_parse_error(testing::small_valid_gguf(4), {"unsupported GGUF version 4"});
  expect_parse_error(testing::small_valid_gguf(0x03000000u), {"big-endian"});
}

TEST(GgufBadInput, TensorDataPastEndOfFile) {
  // [4, 2] F32 = 32 bytes, only 31 present.
  expect_parse_error(one_tensor({4, 2}, 0, 0, 31), {"tensor 't'", "past the end", "32 bytes"});
  // Offset beyond the data section.
  expect_parse_error(one_tensor({1}, 0, 64, 32), {"tensor 't'", "past the end"});
  EXPECT_NO_THROW({
    auto ok = one_tensor({4, 2}, 0, 0, 32);
    GgufFile::parse(ok.data(), ok.size(), "ok.gguf");
  });
  // Offset so large that offset + size wraps around 2^64.
  expect_parse_error(one_tensor({8}, 0, 0xFFFFFFFFFFFFFFE0ull, 32), {"tensor 't'", "past the end"});
}

TEST(GgufBadInput, UnknownTensorType) {
  expect_parse_error(one_tensor({32}, 4, 0, 128), {"tensor 't'", "unknown tensor type 4"});
  expect_parse_error(one_tensor({32}, 1000, 0, 128), {"unknown tensor type 1000"});
}

TEST(GgufBadInput, AbsurdDimensions) {
  expect_parse_error(one_tensor({1, 1, 1, 1, 1}, 0, 0, 4), {"tensor 't'", "5 dimensions"});
  expect_parse_error(one_tensor({}, 0, 0, 4), {"tensor 't'", "0 dimensions"});
  expect_parse_error(one_tensor({4, 0}, 0, 0, 16), {"tensor 't'", "dimension 1 = 0"});
  expect_parse_error(one_tensor({uint64_t{1} << 63}, 0, 0, 4), {"tensor 't'", "9223372036854775808"});
  expect_parse_error(one_tensor({uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0, 4),
                     {"tensor 't'", "overflow"});
  expect_parse_error(one_tensor({uint64_t{1} << 62}, 0, 0, 4), {"tensor 't'", "2^63 bytes"});
  expect_parse_error(one_tensor({33}, 8, 0, 64), {"tensor 't'", "33", "Q8_0", "block size 32"});
  // Offset not a multiple of the alignment.
  expect_parse_error(one_tensor({1}, 0, 4, 64), {"tensor 't'", "offset 4", "alignment 32"});
}

TEST(GgufBadInput, HugeStringLength) {
  Bytes b;
  b.header(3, 0, 1).pod<uint64_t>(uint64_t{1} << 62).raw("key-with-some-padding");
  expect_parse_error(b.data, {"string length 4611686018427387904", "metadata entry #0"});
  Bytes v;
  v.header(3, 0, 1).str("general.name").pod<uint32_t>(8).pod<uint64_t>(1000).raw("short");
  expect_parse_error(v.data, {"string length 1000", "general.name"});
  Bytes t;
  t.header(3, 1, 0).pod<uint64_t>(~uint64_t{0}).raw("name-and-some-padding");
  expect_parse_error(t.data, {"string length 18446744073709551615", "tensor #0"});
}

TEST(GgufBadInput, HugeCounts) {
  Bytes kv;
  kv.header(3, 0, uint64_t{1} << 60);
  expect_parse_error(kv.data, {"metadata entry count 1152921504606846976", "absurd"});
  Bytes many_kv;  // under the hard limit but more than the file can hold
  many_kv.header(3, 0, 1000).kv_u32("a", 1);
  expect_parse_error(many_kv.data, {"metadata entry count 1000", "cannot fit"});
  Bytes tensors;
  tensors.header(3, ~uint64_t{0}, 0);
  expect_parse_error(tensors.data, {"tensor count 18446744073709551615"});
  Bytes array;
  array.header(3, 0, 1).str("tokens").pod<uint32_t>(9).pod<uint32_t>(8).pod<uint64_t>(uint64_t{1} << 40);
  expect_parse_error(array.data, {"tokens", "1099511627776 elements of type STRING"});
  Bytes u8_array;  // 100 one-byte elements claimed, 3 present
  u8_array.header(3, 0, 1).str("x").pod<uint32_t>(9).pod<uint32_t>(0).pod<uint64_t>(100).raw("abc");
  expect_parse_error(u8_array.data, {"'x'", "100 elements of type U8"});
}

TEST(GgufBadInput, BadMetadataValues) {
  Bytes type;
  type.header(3, 0, 1).str("k").pod<uint32_t>(13).pod<uint32_t>(0);
  expect_parse_error(type.data, {"unknown metadata value type 13", "'k'"});
  Bytes elem;
  elem.header(3, 0, 1).str("k").pod<uint32_t>(9).pod<uint32_t>(77).pod<uint64_t>(0);
  expect_parse_error(elem.data, {"unknown metadata value type 77", "'k'"});
  Bytes boolean;
  boolean.header(3, 0, 1).str("flag").pod<uint32_t>(7).pod<uint8_t>(2);
  expect_parse_error(boolean.data, {"bool value 2", "'flag'"});
  Bytes dup;
  dup.header(3, 0, 2).kv_u32("k", 1).kv_u32("k", 2);
  expect_parse_error(dup.data, {"duplicate metadata key 'k'"});
  Bytes deep;  // arrays nested 20 levels
  deep.header(3, 0, 1).str("deep").pod<uint32_t>(9);
  for (int i = 0; i < 20; ++i) deep.pod<uint32_t>(9).pod<uint64_t>(1);
  deep.pod<uint32_t>(0).pod<uint64_t>(0);
  expect_parse_error(deep.data, {"'deep'", "nests arrays deeper"});
}

TEST(GgufBadInput, BadAlignment) {
  for (uint32_t a : {0u, 3u, 48u}) {
    Bytes b;
    b.header(3, 0, 1).kv_u32("general.alignment", a);
    expect_parse_error(b.data, {"general.alignment = " + std::to_string(a), "power of two"});
  }
  Bytes b;
  b.header(3, 0, 1).kv_string("general.alignment", "32");
  expect_parse_error(b.data, {"general.alignment has type STRING, expected U32"});
}

TEST(GgufBadInput, DuplicateTensorName) {
  Bytes b;
  b.header(3, 2, 0).tensor("w", {1}, 0, 0).tensor("w", {1}, 0, 32).pad_to(32);
  b.data.resize(b.size() + 64);
  expect_parse_error(b.data, {"duplicate tensor name 'w'"});
}

// Random byte corruption of a valid image: parsing either succeeds or throws Error; never
// crashes, hangs or throws anything else (run under ASan to catch out-of-bounds reads).
TEST(GgufBadInput, RandomCorruptionNeverCrashes) {
  const auto valid = testing::small_valid_gguf();
  std::mt19937_64 rng(testing::test_seed("GgufBadInput.RandomCorruptionNeverCrashes"));
  const int trials = 3000 / testing::sanitizer_slowdown();
  int n_errors = 0;
  for (int trial = 0; trial < trials; ++trial) {
    auto bytes = valid;
    const int n_flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n_flips; ++i) {
      const size_t at = rng() % bytes.size();
      bytes[at] = (rng() % 2) ? static_cast<uint8_t>(rng()) : static_cast<uint8_t>(bytes[at] ^ (1u << (rng() % 8)));
    }
    if (rng() % 4 == 0) bytes.resize(rng() % bytes.size());
    try {
      auto f = GgufFile::parse(bytes.data(), bytes.size(), "fuzz.gguf");
      for (const auto& t : f->tensors())  // every accepted tensor lies inside the image
        ASSERT_LE(t.data + t.n_bytes, bytes.data() + bytes.size()) << t.name;
    } catch (const Error&) {
      ++n_errors;
    }
  }
  EXPECT_GT(n_errors, 0);
}

}  // namespace
}  // namespace specdec
