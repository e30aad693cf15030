// MappedFile::release (used when weights are repacked at load): the pages wholly inside the range
// leave the process's resident set, the mapping still reads the file's bytes afterwards (they are
// faulted in again from the page cache), partial pages at the ends stay, and a range outside the
// mapping is an Error naming the file.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "common/testing.h"
#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/mmap_file.h"

namespace specdec {
namespace {

// This process's resident file-backed memory in KiB (/proc/self/status RssFile), or -1.
long rss_file_kib() {
  std::ifstream status("/proc/self/status");
  std::string key;
  long value = -1;
  while (status >> key) {
    if (key == "RssFile:") {
      status >> value;
      return value;
    }
    status.ignore(1 << 20, '\n');
  }
  return -1;
}

TEST(MappedFileRelease, DropsResidentPagesAndKeepsTheBytes) {
  const std::string path = testing::temp_dir() + "/release.bin";
  const size_t n = (size_t{16} << 20) + 1000;  // 16 MiB and a partial page
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 2654435761u >> 24);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(n));

  MappedFile file(path);
  ASSERT_EQ(file.size(), n);
  uint64_t sum = 0;
  for (size_t i = 0; i < n; i += 512) sum += file.data()[i];  // every page resident
  const long before = rss_file_kib();
  file.release(file.data() + 100, n - 200);  // all but a partial page at each end
  const long after = rss_file_kib();
  ASSERT_GE(before, 0) << "no RssFile in /proc/self/status";
  EXPECT_GE(before - after, 15 * 1024) << "RssFile " << before << " -> " << after << " KiB";
  uint64_t sum_again = 0;
  for (size_t i = 0; i < n; i += 512) sum_again += file.data()[i];
  EXPECT_EQ(sum, sum_again);
  EXPECT_EQ(0, std::memcmp(file.data(), bytes.data(), n));  // every byte, read back from the file

  file.release(file.data(), 0);  // nothing
  EXPECT_THROW(file.release(file.data() + 1, n), Error);
  EXPECT_THROW(file.release(file.data() - 1, 10), Error);
  EXPECT_THROW(file.release(file.data() + n, 1), Error);
  try {
    file.release(file.data(), n + 1);
    FAIL() << "no Error for a range past the end";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// GgufFile::open keeps copies of the metadata and tensor names, so the header's pages leave the
// resident set once parsed: a large vocabulary is not held twice. The metadata still reads back.
TEST(MappedFileRelease, GgufHeaderPagesAreDroppedAfterParsing) {
  const std::string path = testing::temp_dir() + "/header_release.gguf";
  std::vector<std::string> tokens(300000);  // ~8 MiB of header
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = "token-" + std::to_string(i) + "-padding-padding";
  GgufWriter writer;
  writer.set_string_array("tokenizer.ggml.tokens", tokens);
  const std::vector<float> weights(1024, 0.5f);
  writer.add_tensor_f32("w", {1024}, weights.data());
  writer.write(path);

  const long before = rss_file_kib();
  ASSERT_GE(before, 0) << "no RssFile in /proc/self/status";
  const auto file = GgufFile::open(path);
  const long after = rss_file_kib();
  // Without the release the parse leaves the whole header (~8 MiB) resident.
  EXPECT_LT(after - before, 1024) << "RssFile " << before << " -> " << after << " KiB after parsing";
  const auto names = file->get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(names.size(), tokens.size());
  EXPECT_EQ(names[123456], tokens[123456]);
  EXPECT_EQ(reinterpret_cast<const float*>(file->tensor("w").data)[1023], 0.5f);
}

// ranges_outside: the gaps between kept ranges given in any order, overlapping or touching,
// at the ends or not; no empty gap.
TEST(MappedFileRelease, RangesOutsideAreTheGapsBetweenKeptRanges) {
  static const uint8_t bytes[100] = {};
  const uint8_t* b = bytes;
  using Ranges = std::vector<ByteRange>;
  EXPECT_EQ(ranges_outside(b, b + 100, {}), (Ranges{{b, 100}}));
  EXPECT_EQ(ranges_outside(b, b + 100, {{b + 60, 10}, {b + 10, 20}}), (Ranges{{b, 10}, {b + 30, 30}, {b + 70, 30}}));
  EXPECT_EQ(ranges_outside(b, b + 100, {{b, 50}, {b + 40, 20}, {b + 60, 40}}), Ranges{});  // overlapping, touching
  EXPECT_EQ(ranges_outside(b, b + 100, {{b + 20, 30}, {b + 25, 5}}), (Ranges{{b, 20}, {b + 50, 50}}));  // nested
  EXPECT_EQ(ranges_outside(b, b + 100, {{b + 50, 0}}), (Ranges{{b, 50}, {b + 50, 50}}));  // empty kept range
}

// GgufFile::release_pages_except (the loader's last step): the pages outside the kept ranges
// leave the resident set, every byte still reads back, and a range outside the mapping is an
// Error naming the file. (Whether the kept pages stay resident depends on the kernel: one that
// maps the file in large folios may drop whole folios; ranges_outside is tested above.)
TEST(MappedFileRelease, AllButTheKeptRangesAreDropped) {
  const std::string path = testing::temp_dir() + "/release_except.gguf";
  const size_t n = 4u << 20;  // floats: 16 MiB of tensor data
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = static_cast<float>(i % 1000);
  GgufWriter writer;
  writer.add_tensor_f32("big", {static_cast<int64_t>(n)}, values.data());
  writer.write(path);
  const auto file = GgufFile::open(path);
  const auto* data = static_cast<const uint8_t*>(file->tensor("big").data);
  uint64_t sum = 0;
  for (size_t i = 0; i < n * 4; i += 512) sum += data[i];  // every page resident
  const long before = rss_file_kib();
  ASSERT_GE(before, 0) << "no RssFile in /proc/self/status";
  // Two kept ranges of 1 MiB + 100 bytes, given out of order, starting mid-page.
  file->release_pages_except({{data + (9u << 20) + 100, (1u << 20) + 100}, {data + (2u << 20) + 100, (1u << 20) + 100}});
  const long after = rss_file_kib();
  EXPECT_GE(before - after, 14 * 1024 - 64) << "RssFile " << before << " -> " << after << " KiB";
  uint64_t sum_again = 0;
  for (size_t i = 0; i < n * 4; i += 512) sum_again += data[i];
  EXPECT_EQ(sum, sum_again);
  EXPECT_EQ(0, std::memcmp(data, values.data(), n * 4));
  try {
    file->release_pages_except({{data, n * 4 + 1}});
    FAIL() << "no Error for a range past the end";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace specdec
