// The vectorised weight decoders of matmul (AVX2 instructions, used by the AVX2 and AVX-512
// paths) produce exactly the scalar decoder's values (q, scale16, min16, coef16 = min16 - 128 *
// scale16, and the has-min flag), for every type they cover, on random blocks of odd counts.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/testing.h"
#include "kernels/matmul_internal.h"
#include "kernels/matmul_random_weights.h"
#include "specdec/cpu.h"

namespace specdec {
namespace {

using namespace matmul_detail;
using namespace test_matmul;

struct RowBuffers {
  std::vector<int8_t> q;                      // (n_pad)
  std::vector<float> scale16, min16, coef16;  // (n_groups_pad) each
  explicit RowBuffers(int64_t n_in)
      : q(static_cast<size_t>(padded_values(n_in)), 99),
        scale16(static_cast<size_t>(padded_groups(n_in)), 99.0f),
        min16(scale16), coef16(scale16) {}
  UnpackedRow view() { return UnpackedRow{q.data(), scale16.data(), min16.data(), coef16.data()}; }
};

TEST(MatmulUnpack, Avx2DecodersEqualScalarDecoder) {
  if (detected_isa() == Isa::Scalar) GTEST_SKIP() << "no AVX2 on this CPU";
  Rng rng(testing::test_seed("matmul unpack avx2"));
  int n_covered = 0;
  for (DType type : kAllTypes) {
    if (is_float(type)) continue;
    for (int64_t n_blocks : {1, 3}) {  // odd block counts (a padded tail) and a single block
      const int64_t n_in = dtype_info(type).block_size * n_blocks;
      const std::vector<uint8_t> row = random_weights(type, 1, n_in, rng);
      RowBuffers fast(n_in), ref(n_in);
      bool has_min = false;
      if (!try_unpack_row_avx2(type, row.data(), n_in, fast.view(), &has_min)) continue;
      ++n_covered;
      const bool ref_has_min = unpack_row_scalar(type, row.data(), n_in, ref.view());
      for (size_t g = 0; g < ref.scale16.size(); ++g) ref.coef16[g] = ref.min16[g] - 128.0f * ref.scale16[g];
      const std::string name = std::string(dtype_name(type)) + " n_in " + std::to_string(n_in);
      EXPECT_EQ(has_min, ref_has_min) << name;
      EXPECT_EQ(fast.q, ref.q) << name;
      EXPECT_EQ(0, std::memcmp(fast.scale16.data(), ref.scale16.data(), ref.scale16.size() * 4)) << name;
      EXPECT_EQ(0, std::memcmp(fast.min16.data(), ref.min16.data(), ref.min16.size() * 4)) << name;
      EXPECT_EQ(0, std::memcmp(fast.coef16.data(), ref.coef16.data(), ref.coef16.size() * 4)) << name;
    }
  }
  EXPECT_GE(n_covered, 20);  // Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K at two sizes
}

}  // namespace
}  // namespace specdec
