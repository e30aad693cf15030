// Dequantizers and quantizers against llama.cpp's files in ../shared/fixtures/quant:
//  - dequantizing blk.0.ffn_down.weight of tiny-TYPE.gguf reproduces gguf-py's reference
//    dequantization (deq-TYPE.blk.0.ffn_down.f32) bit for bit;
//  - quantizing the F32 original (tiny-f32.gguf) reproduces llama.cpp's quantized bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/testing.h"
#include "kernels/tensor_helpers.h"
#include "specdec/gguf.h"
#include "specdec/kernels.h"

namespace specdec {
namespace {

using testing::dequantize_tensor;

const char* const kFixtureTypes[] = {"F16",  "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                                     "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M"};

class QuantFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantFixture, DequantizeMatchesReferenceBitForBit) {
  const std::string type = GetParam();
  SPECDEC_FIXTURE(model_path, "quant/tiny-" + type + ".gguf");
  SPECDEC_FIXTURE(ref_path, "quant/deq-" + type + ".blk.0.ffn_down.f32");
  auto file = GgufFile::open(model_path);
  const GgufTensorInfo& t = file->tensor("blk.0.ffn_down.weight");
  ASSERT_EQ(t.dims.size(), 2u);
  const std::vector<float> got = dequantize_tensor(t);
  const std::vector<float> want = testing::read_f32_file(ref_path);
  ASSERT_EQ(got.size(), want.size()) << type;
  size_t n_diff = 0, first_diff = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      if (n_diff++ == 0) first_diff = i;
    }
  }
  EXPECT_EQ(n_diff, 0u) << type << " (tensor type " << dtype_name(t.type) << "): first difference at "
                        << first_diff << ": got " << got[first_diff] << " want " << want[first_diff];
}

// llama.cpp quantized these files without an importance matrix, i.e. with the reference
// quantizers we implement, so every 2-D tensor must come out byte-identical.
TEST_P(QuantFixture, QuantizeMatchesLlamaCppBytes) {
  const std::string type = GetParam();
  SPECDEC_FIXTURE(model_path, "quant/tiny-" + type + ".gguf");
  SPECDEC_FIXTURE(f32_path, "quant/tiny-f32.gguf");
  auto quantized = GgufFile::open(model_path);
  auto original = GgufFile::open(f32_path);
  int n_checked = 0;
  for (const GgufTensorInfo& q : quantized->tensors()) {
    if (q.dims.size() != 2 || q.type == DType::F32) continue;
    const GgufTensorInfo& src = original->tensor(q.name);
    ASSERT_EQ(src.type, DType::F32) << q.name;
    ASSERT_EQ(src.dims, q.dims) << q.name;
    const int64_t n_per_row = q.dims[0];
    const size_t row_bytes = dtype_row_bytes(q.type, n_per_row);
    std::vector<uint8_t> row(row_bytes);  // (row_bytes)
    int64_t n_rows_differing = 0, first_row = -1;
    for (int64_t r = 0; r < q.dims[1]; ++r) {
      const float* x = reinterpret_cast<const float*>(src.data) + r * n_per_row;
      quantize_row(q.type, x, row.data(), n_per_row);
      if (std::memcmp(row.data(), q.data + r * row_bytes, row_bytes) != 0) {
        if (n_rows_differing++ == 0) first_row = r;
      }
    }
    EXPECT_EQ(n_rows_differing, 0) << type << ": " << q.name << " (" << dtype_name(q.type) << "): "
                                   << n_rows_differing << " of " << q.dims[1]
                                   << " rows differ, first row " << first_row;
    ++n_checked;
  }
  EXPECT_GT(n_checked, 0) << "no quantized 2-D tensor in " << model_path;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantFixture, ::testing::ValuesIn(kFixtureTypes),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace specdec
