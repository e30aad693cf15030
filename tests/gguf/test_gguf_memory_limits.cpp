// Regression (found while checking the reader's limits for issue 10): every parsed array item was
// a 48-byte GgufValue (arrays are compact now, see GgufArray), so with the old limit of 2^28 items a 256 MiB file of U8 arrays made the
// reader allocate ~12 GiB before failing or succeeding. The limits now cap what a hostile file
// can make the parser allocate (items 2^24, metadata entries 2^20), checked before allocating.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf/gguf_bytes.h"
#include "specdec/error.h"
#include "specdec/gguf.h"

namespace specdec {
namespace {

std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    GgufFile::parse(bytes.data(), bytes.size(), "big.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A file with one U8 array of `count` elements (all present in the file).
std::vector<uint8_t> u8_array_file(uint64_t count) {
  testing::Bytes b;
  b.header(3, 0, 1);
  b.str("a").pod<uint32_t>(9).pod<uint32_t>(0).pod<uint64_t>(count);
  b.data.resize(b.size() + count, 0);
  return b.data;
}

TEST(GgufMemoryLimits, ArrayLongerThan2To24IsRefusedBeforeAllocating) {
  const std::string msg = parse_error(u8_array_file((uint64_t{1} << 24) + 1));
  EXPECT_NE(msg.find("claims 16777217 elements of type U8, more than the limit of 16777216"), std::string::npos) << msg;
}

TEST(GgufMemoryLimits, TotalItemsOverAllArraysAreCapped) {
  // Two arrays of 2^23 + 1 items each: each fits the per-array limit, the total does not.
  const uint64_t half = (uint64_t{1} << 23) + 1;
  testing::Bytes b;
  b.header(3, 0, 2);
  for (const char* key : {"a", "b"}) {
    b.str(key).pod<uint32_t>(9).pod<uint32_t>(0).pod<uint64_t>(half);
    b.data.resize(b.size() + half, 0);
  }
  const std::string msg = parse_error(b.data);
  EXPECT_NE(msg.find("arrays hold more than 16777216 elements in total"), std::string::npos) << msg;
}

TEST(GgufMemoryLimits, ArraysAtTheLimitStillParse) {
  const std::vector<uint8_t> bytes = u8_array_file(uint64_t{1} << 16);
  auto f = GgufFile::parse(bytes.data(), bytes.size(), "ok.gguf");
  const GgufArray& a = *std::get<std::shared_ptr<GgufArray>>(f->find("a")->value);
  EXPECT_EQ(a.size(), size_t{1} << 16);
}

TEST(GgufMemoryLimits, MetadataEntryCountAbove2To20IsAbsurd) {
  testing::Bytes b;
  b.header(3, 0, (uint64_t{1} << 20) + 1);
  b.data.resize(b.size() + 14 * ((size_t{1} << 20) + 1), 0);
  const std::string msg = parse_error(b.data);
  EXPECT_NE(msg.find("metadata entry count 1048577 is absurd (limit 1048576)"), std::string::npos) << msg;
}

}  // namespace
}  // namespace specdec
