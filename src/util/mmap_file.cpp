#include "specdec/mmap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "specdec/error.h"

namespace specdec {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO would otherwise wait forever for a writer; it changes nothing
  // for the regular files that get past the check below.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw Error("cannot stat '" + path + "': " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a pipe"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a file";
    throw Error("'" + path + "' is " + kind + ", not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      throw Error("cannot mmap '" + path + "' (" + std::to_string(size_) + " bytes): " + std::strerror(e));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

void MappedFile::release(const void* p, size_t n) const {
  const auto* begin = static_cast<const uint8_t*>(p);
  if (n == 0) return;
  if (data_ == nullptr || begin < data_ || n > size_ || begin - data_ > static_cast<std::ptrdiff_t>(size_ - n))
    throw Error("release: range of " + std::to_string(n) + " bytes outside the mapping of '" + path_ + "'");
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(begin) + n) / page * page;
  // Advice only: a failure leaves the pages resident, which costs memory, not correctness.
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

void advise_huge_pages(void* p, size_t n) {
#ifdef MADV_HUGEPAGE
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n) / kHugePageBytes * kHugePageBytes;
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);  // advice: failure is harmless
#else
  (void)p, (void)n;
#endif
}

std::vector<ByteRange> ranges_outside(const uint8_t* begin, const uint8_t* end, std::vector<ByteRange> keep) {
  std::sort(keep.begin(), keep.end());
  std::vector<ByteRange> gaps;
  const uint8_t* gap = begin;  // start of the bytes not yet known to be kept
  for (const auto& [b, n] : keep) {
    if (b > gap) gaps.emplace_back(gap, static_cast<size_t>(b - gap));
    gap = std::max(gap, b + n);
  }
  if (end > gap) gaps.emplace_back(gap, static_cast<size_t>(end - gap));
  return gaps;
}

void MappedFile::release_all_except(std::vector<ByteRange> keep) const {
  if (data_ == nullptr) return;
  for (const auto& [b, n] : keep) {
    if (b < data_ || b > data_ + size_ || n > static_cast<size_t>(data_ + size_ - b))
      throw Error("release_all_except: a range of " + std::to_string(n) + " bytes lies outside the mapping of '" + path_ + "'");
  }
  for (const auto& [b, n] : ranges_outside(data_, data_ + size_, std::move(keep))) release(b, n);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace specdec
