// fuzz/fuzz_common.h — helpers shared by the libFuzzer targets (not part of the library).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "specdec/error.h"

namespace specdec::fuzz {

// Folder of the shared fixtures: $SPECDEC_FIXTURES, else ../shared/fixtures next to the sources.
inline std::string fixtures_dir() {
  if (const char* env = std::getenv("SPECDEC_FIXTURES"); env && *env) return env;
  return std::string(SPECDEC_SOURCE_DIR) + "/../shared/fixtures";
}

// Reads little-endian integers from the front of the fuzz input, yielding 0 when it is exhausted.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  template <typename T>
  T take() {
    T v{};
    for (size_t i = 0; i < sizeof(T) && pos_ < size_; ++i, ++pos_)
      v = static_cast<T>(v | static_cast<T>(static_cast<T>(data_[pos_]) << (8 * i)));
    return v;
  }
  const uint8_t* rest() const { return data_ + pos_; }
  size_t rest_size() const { return size_ - pos_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// A property the code under test promises was broken: report it as a crash.
[[noreturn]] inline void property_failed(const std::string& what) {
  std::fprintf(stderr, "fuzz property violated: %s\n", what.c_str());
  std::abort();
}

}  // namespace specdec::fuzz

#define FUZZ_PROPERTY(cond, what)                                   \
  do {                                                              \
    if (!(cond)) ::specdec::fuzz::property_failed(std::string(#cond) + ": " + (what)); \
  } while (0)
