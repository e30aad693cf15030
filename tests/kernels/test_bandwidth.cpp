// The read-bandwidth probe runs on every ISA, returns a positive finite figure and rejects bad
// arguments; each of its read loops (plain and prefetching) reads every byte. (No timing
// assertion beyond "positive": speeds are benchmarks, not tests.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "kernels/bandwidth_internal.h"

#include "specdec/bandwidth.h"
#include "specdec/cpu.h"
#include "specdec/error.h"
#include "specdec/thread_pool.h"

namespace specdec {
namespace {

TEST(Bandwidth, MeasuresPositiveFiniteOnEveryIsa) {
  ThreadPool pool(2);
  const Isa saved = active_isa();
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    const double gbs = measure_read_bandwidth_gbs(pool, size_t{8} << 20, 2);
    EXPECT_TRUE(std::isfinite(gbs) && gbs > 0.0) << isa_name(isa) << ": " << gbs;
  }
  set_active_isa(saved);
}

// Each SIMD loop against the same bytes with one byte changed: the checksum must change (a loop
// that skipped a line, say the prefetching one stepping wrongly, would not see it). The
// checksums differ between loops (different sums), so each loop is compared with itself.
TEST(Bandwidth, EveryReadLoopReadsEveryByte) {
  using namespace bandwidth_detail;
  using ReadFn = uint64_t (*)(const uint8_t*, size_t);
  std::vector<std::pair<const char*, ReadFn>> loops = {{"scalar", read_scalar}};
  if (detected_isa() >= Isa::Avx2) loops.insert(loops.end(), {{"avx2", read_avx2}, {"avx2 prefetch", read_avx2_prefetch}});
  if (detected_isa() >= Isa::Avx512)
    loops.insert(loops.end(), {{"avx512", read_avx512}, {"avx512 prefetch", read_avx512_prefetch}});
  constexpr size_t kBytes = 64 * 1024;  // a multiple of 256
  void* mem = nullptr;
  ASSERT_EQ(posix_memalign(&mem, 64, kBytes), 0);
  uint8_t* buf = static_cast<uint8_t*>(mem);
  for (size_t i = 0; i < kBytes; ++i) buf[i] = static_cast<uint8_t>(i * 37 + 11);
  for (const auto& [name, read] : loops) {
    const uint64_t base = read(buf, kBytes);
    for (size_t at : {size_t{0}, size_t{63}, size_t{64}, size_t{200}, size_t{4095}, kBytes / 2 + 130, kBytes - 1}) {
      buf[at] ^= 0x40;  // flips one bit of one byte: each loop's sums (adds, xors) all see it
      EXPECT_NE(read(buf, kBytes), base) << name << ": byte " << at << " not read";
      buf[at] ^= 0x40;
    }
    EXPECT_EQ(read(buf, kBytes), base) << name << ": not deterministic";
  }
  std::free(mem);
}

TEST(Bandwidth, RejectsBadArguments) {
  ThreadPool pool(1);
  EXPECT_THROW(measure_read_bandwidth_gbs(pool, 1000, 1), Error);
  EXPECT_THROW(measure_read_bandwidth_gbs(pool, size_t{2} << 20, 0), Error);
}

}  // namespace
}  // namespace specdec
