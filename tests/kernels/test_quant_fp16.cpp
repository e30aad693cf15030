// IEEE binary16 and bfloat16 conversions against straightforward references: exhaustive over
// all 65536 half/bf16 patterns for decoding, and nearest-value search (ties to even) for
// encoding on random floats, exact midpoints, subnormals, overflow, infinities and NaN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/testing.h"
#include "specdec/kernels.h"

namespace specdec {
namespace {

uint32_t bits_of(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
float float_of(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// binary16 value from its fields, computed in double: (-1)^s * 2^(e-15) * (1 + m/1024), or
// 2^-14 * m/1024 for subnormals.
double half_value_reference(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  double v;
  if (exp == 0) v = std::ldexp(mant / 1024.0, -14);
  else if (exp == 31) v = mant ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  else v = std::ldexp(1.0 + mant / 1024.0, exp - 15);
  return sign ? -v : v;
}

// Nearest binary16 by search over the non-negative finite halves (ties: even mantissa);
// magnitudes >= 65520 (max half + half an ulp) become infinity.
uint16_t half_from_float_reference(float f) {
  if (std::isnan(f)) return 0x7E00;
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return sign | 0x7C00;
  // Finite non-negative halves 0x0000..0x7BFF are increasing in value.
  int lo = 0, hi = 0x7BFF;
  while (lo < hi) {  // first pattern with value >= a
    const int mid = (lo + hi) / 2;
    if (half_value_reference(static_cast<uint16_t>(mid)) >= a) hi = mid; else lo = mid + 1;
  }
  int best = lo;
  if (lo > 0) {
    const double up = half_value_reference(static_cast<uint16_t>(lo)) - a;
    const double down = a - half_value_reference(static_cast<uint16_t>(lo - 1));
    if (down < up || (down == up && ((lo - 1) & 1) == 0)) best = lo - 1;
  }
  return static_cast<uint16_t>(sign | best);
}

TEST(Fp16, DecodeAllPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const double want = half_value_reference(static_cast<uint16_t>(h));
    const float got = fp16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << std::hex << h;
      ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << h;
    }
  }
}

TEST(Fp16, EncodeRoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_f32(static_cast<uint16_t>(h));
    const uint16_t back = f32_to_fp16(f);
    if (std::isnan(f)) {
      ASSERT_EQ(back & 0x7C00, 0x7C00) << std::hex << h;
      ASSERT_NE(back & 0x3FF, 0) << std::hex << h;  // still a NaN
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

TEST(Fp16, EncodeMidpointsRoundToEven) {
  // The exact midpoint between consecutive halves (representable in float) goes to the even
  // pattern; one float ulp either side goes to the nearer one. Covers subnormals and overflow.
  for (uint32_t h = 0; h < 0x7BFF; ++h) {
    const double a = half_value_reference(static_cast<uint16_t>(h));
    const double b = half_value_reference(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((a + b) / 2);
    ASSERT_EQ(static_cast<double>(mid), (a + b) / 2);
    const uint16_t even = (h & 1) == 0 ? static_cast<uint16_t>(h) : static_cast<uint16_t>(h + 1);
    ASSERT_EQ(f32_to_fp16(mid), even) << std::hex << h;
    ASSERT_EQ(f32_to_fp16(-mid), even | 0x8000) << std::hex << h;
    ASSERT_EQ(f32_to_fp16(std::nextafter(mid, 0.0f)), h) << std::hex << h;
    ASSERT_EQ(f32_to_fp16(std::nextafter(mid, INFINITY)), h + 1) << std::hex << h;
  }
  EXPECT_EQ(f32_to_fp16(65519.996f), 0x7BFF);  // just below the overflow threshold
  EXPECT_EQ(f32_to_fp16(65520.0f), 0x7C00);    // the midpoint to "65536" rounds to inf
  EXPECT_EQ(f32_to_fp16(1e30f), 0x7C00);
  EXPECT_EQ(f32_to_fp16(-INFINITY), 0xFC00);
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // half the smallest subnormal: tie to 0
  EXPECT_EQ(f32_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_fp16(1e-30f), 0x0000);
  EXPECT_EQ(f32_to_fp16(-0.0f), 0x8000);
  const uint16_t nan = f32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(fp16_to_f32(nan)));
}

TEST(Fp16, EncodeRandomFloatsMatchesNearestSearch) {
  std::mt19937_64 rng(testing::test_seed("fp16 encode"));
  std::uniform_int_distribution<uint32_t> pattern;
  const int n_trials = 200000 / testing::sanitizer_slowdown();
  for (int i = 0; i < n_trials; ++i) {
    // Half of the trials within half's exponent range, half anywhere.
    uint32_t u = pattern(rng);
    if (i % 2 == 0) u = (u & 0x807FFFFFu) | ((100u + (u >> 23) % 45u) << 23);
    const float f = float_of(u);
    if (std::isnan(f)) {  // any NaN pattern will do, sign kept
      ASSERT_TRUE(std::isnan(fp16_to_f32(f32_to_fp16(f)))) << std::hex << u;
      ASSERT_EQ(f32_to_fp16(f) >> 15, u >> 31) << std::hex << u;
      continue;
    }
    ASSERT_EQ(f32_to_fp16(f), half_from_float_reference(f)) << std::hex << u;
  }
}

// bfloat16: the top 16 bits of a float, rounded to nearest even; NaN stays NaN.
uint16_t bf16_from_float_reference(float f) {
  if (std::isnan(f)) return 0x7FC0;
  const uint32_t u = bits_of(f);
  const uint32_t lo = u & 0xFFFF0000u;
  const double v_lo = float_of(lo);
  // The next bf16 up in magnitude; past the largest finite value it is 2^128 (-> inf).
  const bool at_max = (lo & 0x7FFF0000u) == 0x7F7F0000u;
  const double v_hi = at_max ? std::copysign(std::ldexp(1.0, 128), v_lo) : float_of(lo + 0x10000u);
  const double x = f;
  const double d_lo = std::fabs(x - v_lo), d_hi = std::fabs(v_hi - x);
  const bool up = d_hi < d_lo || (d_hi == d_lo && ((lo >> 16) & 1u));
  return static_cast<uint16_t>((up ? lo + 0x10000u : lo) >> 16);
}

TEST(Bf16, DecodeIsTopBits) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_to_f32(static_cast<uint16_t>(b));
    ASSERT_EQ(bits_of(f), b << 16);
    if (!std::isnan(f)) ASSERT_EQ(f32_to_bf16(f), b);
    else ASSERT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f))));
  }
}

TEST(Bf16, EncodeMatchesNearestEven) {
  std::mt19937_64 rng(testing::test_seed("bf16 encode"));
  std::uniform_int_distribution<uint32_t> pattern;
  const int n_trials = 200000 / testing::sanitizer_slowdown();
  for (int i = 0; i < n_trials; ++i) {
    uint32_t u = pattern(rng);
    if (i % 4 == 0) u = (u & 0xFFFF0000u) | 0x8000u;  // exact tie
    const float f = float_of(u);
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), bf16_from_float_reference(f)) << std::hex << u;
  }
  EXPECT_EQ(f32_to_bf16(float_of(0x3F808000u)), 0x3F80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(float_of(0x3F818000u)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(float_of(0x7F7FFFFFu)), 0x7F80);  // FLT_MAX rounds to inf
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7F80);
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xFF80);
  EXPECT_EQ(f32_to_bf16(float_of(0x00018000u)), 0x0002);  // subnormal tie to even
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(float_of(0x7F800001u)))));  // signalling NaN
}

}  // namespace
}  // namespace specdec
