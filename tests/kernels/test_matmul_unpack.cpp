// The AVX-512 weight decoders of matmul produce exactly the scalar decoder's values (q, scale16,
// min16, and coef16 = min16 - 128 * scale16), for every type they cover, on random blocks.
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

TEST(MatmulUnpack, Avx512DecodersEqualScalarDecoder) {
  if (detected_isa() != Isa::Avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  Rng rng(testing::test_seed("matmul unpack"));
  int n_covered = 0;
  for (DType type : kAllTypes) {
    if (is_float(type)) continue;
    const int64_t n_in = dtype_info(type).block_size == 256 ? 768 : 96;  // odd block counts
    const std::vector<uint8_t> row = random_weights(type, 1, n_in, rng);
    RowBuffers fast(n_in), ref(n_in);
    if (!try_unpack_row_avx512(type, row.data(), n_in, fast.view())) continue;
    ++n_covered;
    unpack_row_scalar(type, row.data(), n_in, ref.view());
    for (size_t g = 0; g < ref.scale16.size(); ++g) ref.coef16[g] = ref.min16[g] - 128.0f * ref.scale16[g];
    const std::string name = dtype_name(type);
    EXPECT_EQ(fast.q, ref.q) << name;
    EXPECT_EQ(0, std::memcmp(fast.scale16.data(), ref.scale16.data(), ref.scale16.size() * 4)) << name;
    EXPECT_EQ(0, std::memcmp(fast.min16.data(), ref.min16.data(), ref.min16.size() * 4)) << name;
    EXPECT_EQ(0, std::memcmp(fast.coef16.data(), ref.coef16.data(), ref.coef16.size() * 4)) << name;
  }
  EXPECT_GE(n_covered, 8);  // Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K
}

}  // namespace
}  // namespace specdec
