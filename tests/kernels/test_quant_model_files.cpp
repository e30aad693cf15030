// specdec quantize / make-model as library calls: quantize_model reproduces llama.cpp's files
// (tensor types and bytes) from the F32 original, preset rules for narrow models, and
// make_model writes loadable, deterministic random models.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/testing.h"
#include "kernels/tensor_helpers.h"
#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/kernels.h"
#include "specdec/make_model.h"
#include "specdec/model.h"
#include "specdec/thread_pool.h"
#include "specdec/tokenizer.h"

namespace specdec {
namespace {

using testing::dequantize_tensor;
using testing::rel_rms;

std::string temp_path(const std::string& name) { return testing::temp_dir() + "/" + name; }

// Every tensor of `got` has the type, dims and bytes of the same-named tensor in `want`.
void expect_same_tensors(const GgufFile& got, const GgufFile& want) {
  ASSERT_EQ(got.tensors().size(), want.tensors().size());
  for (const auto& w : want.tensors()) {
    const GgufTensorInfo& g = got.tensor(w.name);
    EXPECT_EQ(dtype_name(g.type), std::string(dtype_name(w.type))) << w.name;
    EXPECT_EQ(g.dims, w.dims) << w.name;
    if (g.type == w.type && g.n_bytes == w.n_bytes) {
      EXPECT_EQ(std::memcmp(g.data, w.data, g.n_bytes), 0) << w.name << " bytes differ";
    }
  }
}

TEST(QuantizeModel, Q4_K_M_PresetReproducesLlamaCpp) {
  SPECDEC_FIXTURE(f32_path, "quant/tiny-f32.gguf");
  SPECDEC_FIXTURE(ref_path, "quant/tiny-Q4_K_M.gguf");
  const std::string out = temp_path("q4km.gguf");
  ThreadPool pool(2);
  const QuantizeModelStats stats = quantize_model(f32_path, out, quant_preset("q4_k_m"), &pool);
  EXPECT_EQ(stats.n_tensors, 21u);
  EXPECT_EQ(stats.n_quantized, 16u);
  auto got = GgufFile::open(out);
  auto want = GgufFile::open(ref_path);
  expect_same_tensors(*got, *want);
  EXPECT_EQ(got->get_u32("general.file_type"), 15u);
  EXPECT_EQ(got->get_u32("general.quantization_version"), 2u);
  auto original = GgufFile::open(f32_path);
  EXPECT_EQ(got->get_string_array("tokenizer.ggml.tokens"),
            original->get_string_array("tokenizer.ggml.tokens"));
  EXPECT_EQ(got->get_u32("llama.block_count"), original->get_u32("llama.block_count"));
}

// `--pure` TYPE as the fixtures were made; then dequantize and compare with the original.
TEST(QuantizeModel, PureTypesMatchLlamaCppAndOriginal) {
  SPECDEC_FIXTURE(f32_path, "quant/tiny-f32.gguf");
  const std::pair<const char*, double> cases[] = {{"Q8_0", 0.01}, {"Q4_K", 0.1}};
  auto original = GgufFile::open(f32_path);
  for (const auto& [type, bound] : cases) {
    SPECDEC_FIXTURE(ref_path, std::string("quant/tiny-") + type + ".gguf");
    const std::string out = temp_path(std::string("pure-") + type + ".gguf");
    quantize_model(f32_path, out, quant_preset(type, /*pure=*/true), nullptr);
    auto got = GgufFile::open(out);
    expect_same_tensors(*got, *GgufFile::open(ref_path));
    for (const auto& t : got->tensors()) {
      if (t.dims.size() != 2) continue;
      EXPECT_EQ(t.type, dtype_from_name(type)) << t.name;
      const double e = rel_rms(dequantize_tensor(original->tensor(t.name)), dequantize_tensor(t));
      EXPECT_LE(e, bound) << type << " " << t.name;
    }
  }
}

TEST(QuantizeModel, RejectsBadArguments) {
  EXPECT_THROW(quant_preset("Q7_K"), Error);
  EXPECT_THROW(quantize_model(temp_path("missing.gguf"), temp_path("x.gguf"), quant_preset("Q8_0"),
                              nullptr),
               Error);
  EXPECT_FALSE(std::filesystem::exists(temp_path("x.gguf.tmp")));
}

// A 576-wide, 30-layer model under Q4_K_M holds Q5_0, Q8_0, Q4_K and Q6_K (issue 6).
TEST(QuantPresets, NarrowModelFallsBackToLegacyTypes) {
  const QuantPreset q4km = quant_preset("Q4_K_M");
  const TensorTypeContext ctx{30, 3, /*has_output=*/false};
  EXPECT_EQ(preset_tensor_type(q4km, "token_embd.weight", {576, 32000}, ctx), DType::Q8_0);
  EXPECT_EQ(preset_tensor_type(q4km, "blk.0.attn_q.weight", {576, 576}, ctx), DType::Q5_0);
  EXPECT_EQ(preset_tensor_type(q4km, "blk.0.attn_v.weight", {576, 192}, ctx), DType::Q8_0);
  EXPECT_EQ(preset_tensor_type(q4km, "blk.4.attn_v.weight", {576, 192}, ctx), DType::Q5_0);
  EXPECT_EQ(preset_tensor_type(q4km, "blk.0.ffn_down.weight", {1536, 576}, ctx), DType::Q6_K);
  EXPECT_EQ(preset_tensor_type(q4km, "blk.4.ffn_down.weight", {1536, 576}, ctx), DType::Q4_K);
  EXPECT_EQ(preset_tensor_type(q4km, "blk.0.attn_norm.weight", {576}, ctx), DType::F32);
  EXPECT_EQ(preset_tensor_type(q4km, "blk.5.ffn_down.weight", {1536, 576}, ctx), DType::Q6_K);
  // Wide model: output Q6_K, untied token_embd keeps the base type.
  const TensorTypeContext wide{16, 4, true};
  EXPECT_EQ(preset_tensor_type(q4km, "output.weight", {2048, 32000}, wide), DType::Q6_K);
  EXPECT_EQ(preset_tensor_type(q4km, "token_embd.weight", {2048, 32000}, wide), DType::Q4_K);
  EXPECT_EQ(preset_tensor_type(quant_preset("Q8_0"), "output.weight", {2048, 32000}, wide), DType::Q8_0);
  EXPECT_EQ(preset_tensor_type(quant_preset("Q2_K"), "blk.3.attn_v.weight", {2048, 512}, wide), DType::Q4_K);
  EXPECT_EQ(preset_tensor_type(quant_preset("Q3_K_M"), "blk.3.attn_output.weight", {2048, 2048}, wide),
            DType::Q4_K);
  EXPECT_EQ(preset_tensor_type(quant_preset("Q4_K_M", true), "output.weight", {2048, 32000}, wide),
            DType::Q4_K);
}

TEST(MakeModel, TinyModelLoadsAndIsDeterministic) {
  const ModelShape shape = model_shape("tiny");
  const std::string a = temp_path("made-a.gguf"), b = temp_path("made-b.gguf");
  ThreadPool pool(2);
  const MakeModelStats stats = make_model(shape, quant_preset("Q8_0"), 7, a, &pool);
  make_model(shape, quant_preset("Q8_0"), 7, b, nullptr);
  EXPECT_EQ(stats.n_params, 512u * 256 * 2 + 256 + 2u * (2 * 256 + 256 * 256 * 2 + 256 * 128 * 2 +
                                                         3 * 256 * 768));
  auto fa = GgufFile::open(a);
  auto fb = GgufFile::open(b);
  expect_same_tensors(*fa, *fb);  // thread count does not matter

  const ModelConfig config = read_model_config(*fa);
  EXPECT_EQ(config.n_embd, 256);
  EXPECT_EQ(config.n_layers, 2);
  EXPECT_EQ(config.n_heads, 4);
  EXPECT_EQ(config.n_kv_heads, 2);
  EXPECT_EQ(config.n_ff, 768);
  EXPECT_EQ(config.n_vocab, 512);
  // Weights ~ N(0, 0.02), norms exactly 1.
  const std::vector<float> w = dequantize_tensor(fa->tensor("blk.1.ffn_up.weight"));
  double sum2 = 0;
  for (float v : w) sum2 += double(v) * v;
  EXPECT_NEAR(std::sqrt(sum2 / w.size()), 0.02, 0.001);
  for (float v : dequantize_tensor(fa->tensor("blk.0.attn_norm.weight"))) ASSERT_EQ(v, 1.0f);
  // A different seed gives different weights.
  const std::string c = temp_path("made-c.gguf");
  make_model(shape, quant_preset("Q8_0"), 8, c, nullptr);
  auto fc = GgufFile::open(c);
  EXPECT_NE(std::memcmp(fa->tensor("output.weight").data, fc->tensor("output.weight").data, 1024), 0);

  // The tokenizer round-trips text (byte fallback covers anything) and the model runs.
  auto tokenizer = Tokenizer::from_gguf(*fa);
  const std::string text = "Once upon a time, a little dog saw a big tree. Ünïcödé!";
  const std::vector<Token> ids = tokenizer->encode(text, /*add_special=*/true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(tokenizer->decode(std::vector<Token>(ids.begin() + 1, ids.end())), text);
  auto model = Transformer::load(a, ModelOptions{1});
  KvCache cache = model->new_cache(64);
  Batch batch;
  for (int i = 0; i < 4; ++i) batch.add(ids[i], i, i - 1, 0, i == 3);
  KvCache* caches[] = {&cache};
  Logits logits;
  model->forward(batch, caches, logits);
  ASSERT_EQ(logits.n_rows(), 1);
  for (int v = 0; v < logits.n_vocab; ++v) ASSERT_TRUE(std::isfinite(logits.row(0)[v]));
}

TEST(MakeModel, PresetsGiveMixedTypesAndShapesAreKnown) {
  ModelShape shape = model_shape("tiny");
  const MakeModelStats stats = make_model(shape, quant_preset("Q4_K_M"), 1, temp_path("made-q4km.gguf"), nullptr);
  std::map<std::string, DType> types(stats.types.begin(), stats.types.end());
  EXPECT_EQ(types["output.weight"], DType::Q6_K);
  EXPECT_EQ(types["blk.1.ffn_down.weight"], DType::Q6_K);
  EXPECT_EQ(types["blk.0.ffn_down.weight"], DType::Q4_K);
  EXPECT_EQ(types["output_norm.weight"], DType::F32);
  EXPECT_EQ(model_shape("llama-150m").n_embd, 576);
  EXPECT_TRUE(model_shape("llama-150m").tied_output);
  EXPECT_EQ(model_shape("llama-1b").n_ff, 8192);
  EXPECT_EQ(model_shape("llama-8b").n_ff, 14336);
  EXPECT_THROW(model_shape("llama-70b"), Error);
}

}  // namespace
}  // namespace specdec
