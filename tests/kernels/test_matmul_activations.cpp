// The AVX-512 and AVX2 activation quantizers of matmul produce exactly the scalar quantizer's bytes,
// scales and block sums (so the integer paths of every ISA start from the same activations),
// on random rows with outliers, exact ties (x / d = k + 0.5), zeros and non-finite values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/testing.h"
#include "kernels/matmul_internal.h"
#include "specdec/cpu.h"
#include "specdec/rng.h"

namespace specdec {
namespace {

using namespace matmul_detail;

struct ActBuffers {
  std::vector<int8_t> values;
  std::vector<float> scales32, sums16, sums32, scales32_bm, sums32_bm;
  std::vector<int32_t> neg128_sums32, neg32_sums16;
  QuantizedActs acts;
  ActBuffers(int M, int64_t n_in) {
    acts.n_pad = padded_values(n_in);
    acts.n_groups_pad = padded_groups(n_in);
    acts.row_stride = act_row_stride(n_in);
    acts.group_stride = act_group_stride(n_in);
    values.assign(static_cast<size_t>(M * acts.row_stride), 99);                  // (M, row_stride)
    scales32.assign(static_cast<size_t>(M * acts.row_stride / 32), 99.0f);        // (M, row_stride / 32)
    sums16.assign(static_cast<size_t>(M * acts.group_stride), 99.0f);             // (M, group_stride)
    sums32.assign(static_cast<size_t>(M * acts.row_stride / 32), 99.0f);          // (M, row_stride / 32)
    neg128_sums32.assign(static_cast<size_t>(M * acts.row_stride / 32), 99);      // (M, row_stride / 32)
    neg32_sums16.assign(static_cast<size_t>(M * acts.group_stride), 99);          // (M, group_stride)
    acts.block_stride = M + 3;  // rows allocated past M stay untouched
    scales32_bm.assign(static_cast<size_t>(acts.block_stride * acts.row_stride / 32), 99.0f);  // (row_stride / 32, block_stride)
    sums32_bm.assign(static_cast<size_t>(acts.block_stride * acts.row_stride / 32), 99.0f);    // (row_stride / 32, block_stride)
    acts.values = values.data();
    acts.scales32 = scales32.data();
    acts.sums16 = sums16.data();
    acts.sums32 = sums32.data();
    acts.neg128_sums32 = neg128_sums32.data();
    acts.neg32_sums16 = neg32_sums16.data();
    acts.scales32_bm = scales32_bm.data();
    acts.sums32_bm = sums32_bm.data();
  }
};

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// The vectorised quantizer `quantize_simd` gives the scalar quantizer's bytes and scales bit for bit.
void check_quantizer_equals_scalar(void (*quantize_simd)(const float*, int, int64_t, const QuantizedActs&),
                                   const char* seed_name) {
  Rng rng(testing::test_seed(seed_name));
  for (int64_t n_in : {32, 96, 2048, 2080}) {
    const int M = 7;
    std::vector<float> x(static_cast<size_t>(M * n_in));  // (M, n_in)
    for (auto& v : x) v = static_cast<float>(rng.uniform() * 2.0 - 1.0) * (rng.below(40) == 0 ? 50.0f : 1.0f);
    // Row 1: exact ties. With max |x| = 127 the scale is 1, so x = k + 0.5 rounds away from zero.
    for (int64_t i = 0; i < n_in; ++i)
      x[n_in + i] = i % 32 == 0 ? 127.0f : static_cast<float>(static_cast<int>(rng.below(200)) - 100) + 0.5f;
    std::fill(x.begin() + 2 * n_in, x.begin() + 3 * n_in, 0.0f);  // row 2: zeros (d = 0)
    x[3 * n_in + 5] = std::numeric_limits<float>::quiet_NaN();      // row 3: NaN, -inf in the last block
    x[3 * n_in + n_in - 1] = -std::numeric_limits<float>::infinity();
    x[4 * n_in + 7] = 1e-40f;                                         // row 4: a denormal
    ActBuffers scalar(M, n_in), simd(M, n_in);
    quantize_activations(x.data(), M, n_in, scalar.acts);
    quantize_simd(x.data(), M, n_in, simd.acts);
    EXPECT_EQ(scalar.values, simd.values) << "n_in " << n_in;
    EXPECT_TRUE(same_bits(scalar.scales32, simd.scales32)) << "n_in " << n_in;
    EXPECT_TRUE(same_bits(scalar.sums16, simd.sums16)) << "n_in " << n_in;
    EXPECT_TRUE(same_bits(scalar.sums32, simd.sums32)) << "n_in " << n_in;
    EXPECT_EQ(scalar.neg128_sums32, simd.neg128_sums32) << "n_in " << n_in;
    EXPECT_EQ(scalar.neg32_sums16, simd.neg32_sums16) << "n_in " << n_in;
    EXPECT_TRUE(same_bits(scalar.scales32_bm, simd.scales32_bm)) << "n_in " << n_in;
    EXPECT_TRUE(same_bits(scalar.sums32_bm, simd.sums32_bm)) << "n_in " << n_in;
    // The block-major terms are the row-major ones transposed; the rows past M are untouched.
    const int64_t n_blocks = scalar.acts.row_stride / 32;
    for (int64_t b = 0; b < scalar.acts.n_pad / 32; ++b) {
      for (int r = 0; r < M + 3; ++r) {
        const size_t bm = static_cast<size_t>(b * scalar.acts.block_stride + r), rm = static_cast<size_t>(r * n_blocks + b);
        if (r >= M) {
          ASSERT_EQ(scalar.scales32_bm[bm], 99.0f) << "block " << b << " row " << r;
          continue;
        }
        ASSERT_TRUE(std::memcmp(&scalar.scales32_bm[bm], &scalar.scales32[rm], 4) == 0) << "block " << b << " row " << r;
        ASSERT_TRUE(std::memcmp(&scalar.sums32_bm[bm], &scalar.sums32[rm], 4) == 0) << "block " << b << " row " << r;
      }
    }
    // The ties really were rounded away from zero (std::round), not to even.
    EXPECT_EQ(scalar.values[static_cast<size_t>(scalar.acts.row_stride) + 1],
              static_cast<int8_t>(std::round(x[n_in + 1])));
  }
}

TEST(MatmulActivations, Avx512QuantizerEqualsScalar) {
  if (detected_isa() != Isa::Avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  check_quantizer_equals_scalar(quantize_activations_avx512, "matmul activations");
}

TEST(MatmulActivations, Avx2QuantizerEqualsScalar) {
  if (detected_isa() == Isa::Scalar) GTEST_SKIP() << "no AVX2 on this CPU";
  check_quantizer_equals_scalar(quantize_activations_avx2, "matmul activations avx2");
}

}  // namespace
}  // namespace specdec
