// specdec/rng.h — seeded random numbers (xoshiro256**, seeded through splitmix64).
// The same seed gives the same sequence on every machine and build.
#pragma once

#include <cstdint>

namespace specdec {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0x5eed);
  uint64_t next_u64();
  // Uniform in [0, 1) with 53 random bits.
  double uniform();
  // Uniform integer in [0, n), n >= 1.
  uint64_t below(uint64_t n);

 private:
  uint64_t s_[4];
};

}  // namespace specdec
