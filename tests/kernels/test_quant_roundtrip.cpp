// quantize_row -> dequantize_row round trips on fresh random data (seed printed; repeat a run
// with SPECDEC_TEST_SEED), with a relative RMS error bound per type, plus edge rows and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/testing.h"
#include "kernels/tensor_helpers.h"
#include "specdec/error.h"
#include "specdec/kernels.h"
#include "kernels/quant_blocks.h"
#include "kernels/quantize_activations.h"

namespace specdec {
namespace {

using testing::rel_rms;

struct RoundTripCase {
  DType type;
  double max_rel_rms;  // ||dequant(quant(x)) - x|| / ||x|| for Gaussian rows with outliers
};

// Bounds on Gaussian rows with 1% outliers of 8 sigma (which dominate the error of the block
// types): about 1.25x the worst aggregate error seen over 15 random seeds; a single row may
// reach kRowSlack times the bound. F32 must round-trip exactly.
constexpr double kRowSlack = 2.0;
const RoundTripCase kCases[] = {
    {DType::F32, 0.0},     {DType::F16, 2.5e-4},  {DType::BF16, 2e-3},  {DType::Q8_0, 1.1e-2},
    {DType::Q6_K, 3.3e-2}, {DType::Q5_1, 6.5e-2}, {DType::Q5_0, 9e-2},  {DType::Q5_K, 6e-2},
    {DType::Q4_1, 0.13},   {DType::Q4_0, 0.18},   {DType::Q4_K, 0.12},  {DType::Q3_K, 0.26},
    {DType::Q2_K, 0.46},
};

// Gaussian row (sigma scale) with ~1% outliers of 8 sigma, as real weight rows have.
std::vector<float> random_row(std::mt19937_64& rng, int64_t n, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));  // (n)
  for (auto& v : x) {
    v = normal(rng);
    if (uniform(rng) < 0.01f) v = (v < 0 ? -8.0f : 8.0f) * scale;
  }
  return x;
}

std::vector<float> round_trip(DType type, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(dtype_row_bytes(type, n));  // (row bytes)
  std::vector<float> y(x.size());                    // (n)
  quantize_row(type, x.data(), q.data(), n);
  dequantize_row(type, q.data(), y.data(), n);
  return y;
}

class QuantRoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(QuantRoundTrip, RelativeRmsWithinBound) {
  const RoundTripCase c = GetParam();
  std::mt19937_64 rng(testing::test_seed(dtype_name(c.type)));
  const int block = dtype_info(c.type).block_size;
  // Several row lengths (odd block counts included) and scales spanning fp16's range.
  const int64_t n_blocks_list[] = {1, 3, 7, 16};
  const float scales[] = {1e-3f, 0.02f, 1.0f, 50.0f};
  std::vector<float> all_x, all_y;
  double worst_row = 0;
  for (int64_t n_blocks : n_blocks_list) {
    const int64_t n = std::max<int64_t>(n_blocks * std::max(block, 32), block);
    for (float scale : scales) {
      const std::vector<float> x = random_row(rng, n, scale);
      const std::vector<float> y = round_trip(c.type, x);
      for (float v : y) ASSERT_TRUE(std::isfinite(v)) << dtype_name(c.type);
      const double e = rel_rms(x, y);
      worst_row = std::max(worst_row, e);
      EXPECT_LE(e, c.max_rel_rms * kRowSlack) << dtype_name(c.type) << " n=" << n << " scale=" << scale;
      all_x.insert(all_x.end(), x.begin(), x.end());
      all_y.insert(all_y.end(), y.begin(), y.end());
    }
  }
  const double e = rel_rms(all_x, all_y);
  std::printf("[quant] %-5s relative RMS error %.3g (bound %.3g), worst row %.3g\n",
              dtype_name(c.type), e, c.max_rel_rms, worst_row);
  EXPECT_LE(e, c.max_rel_rms) << dtype_name(c.type);
  if (c.type == DType::F32) {
    EXPECT_EQ(all_x, all_y);
  }
}

// All-zero and constant rows quantize without NaN; zeros come back as zeros exactly.
TEST_P(QuantRoundTrip, ZeroAndConstantRows) {
  const RoundTripCase c = GetParam();
  const int64_t n = 512;
  const std::vector<float> zeros(n, 0.0f);
  for (float v : round_trip(c.type, zeros)) ASSERT_EQ(v, 0.0f) << dtype_name(c.type);
  const std::vector<float> constant(n, 0.75f);
  const std::vector<float> y = round_trip(c.type, constant);
  for (float v : y) ASSERT_TRUE(std::isfinite(v)) << dtype_name(c.type);
  EXPECT_LE(rel_rms(constant, y), c.max_rel_rms + 1e-6) << dtype_name(c.type);
}

// Quantizing the dequantized row again is (nearly) a fixed point: the levels are on the grid.
TEST_P(QuantRoundTrip, RequantizeIsStable) {
  const RoundTripCase c = GetParam();
  std::mt19937_64 rng(testing::test_seed(dtype_name(c.type)));
  const std::vector<float> x = random_row(rng, 1024, 0.05f);
  const std::vector<float> y = round_trip(c.type, x);
  const std::vector<float> z = round_trip(c.type, y);
  // A second pass may move levels by rounding of the re-derived scales, never by much.
  EXPECT_LE(rel_rms(y, z), c.max_rel_rms) << dtype_name(c.type);
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, QuantRoundTrip, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<RoundTripCase>& info) {
                           return std::string(dtype_name(info.param.type));
                         });

TEST(QuantRow, RejectsBadLengthsAndTypes) {
  std::vector<float> x(100, 1.0f);
  std::vector<uint8_t> q(1024);
  EXPECT_THROW(quantize_row(DType::Q4_K, x.data(), q.data(), 100), Error);
  EXPECT_THROW(dequantize_row(DType::Q8_0, q.data(), x.data(), 33), Error);
  EXPECT_THROW(quantize_row(DType::Q8_K, x.data(), q.data(), 256), Error);  // activation type
  EXPECT_THROW(dequantize_row(DType::I32, q.data(), x.data(), 4), Error);
  try {
    quantize_row(DType::Q6_K, x.data(), q.data(), 100);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("100"), std::string::npos) << e.what();
  }
}

// Activation quantizers: q * d reproduces x within half a step, sums are consistent.
TEST(QuantActivations, Q8_1AndQ8_KRoundTrip) {
  std::mt19937_64 rng(testing::test_seed("activations"));
  const std::vector<float> x = random_row(rng, 512, 3.0f);
  std::vector<quant::BlockQ8_1> a(512 / 32);  // (16 blocks)
  quant::quantize_row_q8_1(x.data(), a.data(), 512);
  for (int b = 0; b < 16; ++b) {
    const float d = fp16_to_f32(a[b].d);
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      sum += a[b].qs[i];
      // Half a step, plus |q| <= 127 times the binary16 rounding of d (2^-11 relative).
      EXPECT_LE(std::fabs(a[b].qs[i] * d - x[32 * b + i]), 0.57f * d + 1e-6f);
    }
    EXPECT_NEAR(fp16_to_f32(a[b].s), sum * d, std::fabs(sum * d) * 1e-3 + 1e-6);
  }
  std::vector<quant::BlockQ8_K> k(2);  // (2 blocks of 256)
  quant::quantize_row_q8_k(x.data(), k.data(), 512);
  for (int b = 0; b < 2; ++b) {
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += k[b].qs[16 * j + i];
      EXPECT_EQ(k[b].bsums[j], sum);
    }
    for (int i = 0; i < 256; ++i)
      EXPECT_LE(std::fabs(k[b].qs[i] * k[b].d - x[256 * b + i]), 0.5f * std::fabs(k[b].d) * 1.01f);
  }
  std::vector<quant::BlockQ8_0> z(16);  // (16 blocks)
  const std::vector<float> zeros(512, 0.0f);
  quant::quantize_row_q8_0(zeros.data(), z.data(), 512);
  for (const auto& blk : z) EXPECT_EQ(fp16_to_f32(blk.d), 0.0f);
}

}  // namespace
}  // namespace specdec
