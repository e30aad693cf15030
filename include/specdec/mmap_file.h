// specdec/mmap_file.h — read-only memory-mapped file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace specdec {

using ByteRange = std::pair<const uint8_t*, size_t>;  // {first byte, length}

// The parts of [begin, end) that no range of `keep` covers, in order, none empty. Requires: each
// kept range lies inside [begin, end). Cost: O(k log k).
std::vector<ByteRange> ranges_outside(const uint8_t* begin, const uint8_t* end, std::vector<ByteRange> keep);

class MappedFile {
 public:
  // Throws Error naming the path and the OS error when the file cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops this process's resident pages lying wholly inside [p, p + n) (a range of the mapping;
  // partial pages at its ends stay): they leave its RSS and are read again from the page cache
  // if touched. For data copied elsewhere (repacked weights). Error for a range outside the map.
  void release(const void* p, size_t n) const;
  // release() of every part of the mapping outside the kept ranges (ranges_outside), so only the
  // pages a kept range touches stay. Error naming the file for a kept range outside the map.
  // (Some kernels map file pages as large folios and drop whole folios, kept bytes included:
  // those are read again from the page cache when touched.)
  void release_all_except(std::vector<ByteRange> keep) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Bytes of a transparent huge page (x86-64 Linux: 2 MiB).
constexpr size_t kHugePageBytes = size_t{2} << 20;

// Asks the kernel to back the whole kHugePageBytes-aligned pages inside [p, p + n) of this
// process's anonymous memory with transparent huge pages (madvise MADV_HUGEPAGE, for systems
// whose THP mode is "madvise"); the partial pages at the ends keep 4 KiB pages, so no byte
// outside the range becomes resident. Call before the pages are first touched. Advice only:
// no effect where THP is off or unsupported.
void advise_huge_pages(void* p, size_t n);

}  // namespace specdec
