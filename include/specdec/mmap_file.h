// specdec/mmap_file.h — read-only memory-mapped file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace specdec {

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

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace specdec
