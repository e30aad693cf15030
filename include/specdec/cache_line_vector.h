// specdec/cache_line_vector.h — std::vector whose storage starts on a 64-byte cache line.
// For buffers that SIMD loops stream (the KV cache): a large std::vector's storage starts 16
// bytes past a page (glibc's chunk header), so every 64-byte row straddles two cache lines and
// half of its 32-byte loads are split loads. Allocation cost and semantics are std::vector's.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace specdec {

inline constexpr std::size_t kCacheLineBytes = 64;

template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}  // NOLINT: rebinding, as std::allocator
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kCacheLineBytes}));
  }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, std::align_val_t{kCacheLineBytes}); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept { return true; }
};

template <typename T>
using CacheLineVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace specdec
