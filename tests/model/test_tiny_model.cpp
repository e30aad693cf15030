// The test-model builders of tests/common/tiny_model.h: random models load and run for every
// architecture and several weight types, carry a usable tokenizer, are deterministic in the
// seed; noisy copies keep shapes and metadata and move the logits by about the noise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "common/testing.h"
#include "common/tiny_model.h"
#include "model/model_test_util.h"
#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/model.h"
#include "specdec/tokenizer.h"
#include "specdec/make_model.h"

namespace specdec::testing {
namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(TinyModel, RandomModelsLoadAndRunForEachArchAndType) {
  const std::vector<Token> tokens = {1, 40, 41, 42, 280};
  for (const char* arch : {"llama", "qwen2"}) {
    for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
      TinyModelSpec spec;
      spec.arch = arch;
      spec.weight_type = type;
      spec.rope_freqs = std::string(arch) == "llama" && type == DType::F32;
      const std::string path = make_random_llama(std::string("tiny-") + arch + "-" + dtype_name(type) + ".gguf", spec);
      auto model = Transformer::load(path, ModelOptions{1});
      const ModelConfig& c = model->config();
      EXPECT_EQ(c.arch, arch);
      EXPECT_EQ(c.n_vocab, spec.n_vocab);
      EXPECT_EQ(c.n_embd, spec.n_embd);
      EXPECT_EQ(c.n_kv_heads, spec.n_kv_heads);
      EXPECT_EQ(c.n_ctx_train, spec.n_ctx);
      EXPECT_EQ(c.tied_output, std::string(arch) == "qwen2");
      EXPECT_EQ(c.rope.freq_factors != nullptr, spec.rope_freqs);
      EXPECT_EQ(model->gguf().tensor("blk.0.ffn_up.weight").type, type);
      const std::vector<float> logits = decode_one_at_a_time(*model, tokens);
      for (float x : logits) ASSERT_TRUE(std::isfinite(x)) << arch << " " << dtype_name(type);
      // Rows differ (the model is not degenerate).
      EXPECT_NE(std::memcmp(logits.data(), logits.data() + c.n_vocab, sizeof(float) * c.n_vocab), 0);
    }
  }
}

TEST(TinyModel, SameSpecSameBytesOtherSeedOtherWeights) {
  TinyModelSpec spec;
  const std::string a = make_random_llama("det-a.gguf", spec);
  const std::string b = make_random_llama("det-b.gguf", spec);
  EXPECT_EQ(file_bytes(a), file_bytes(b));
  spec.seed = 2;
  EXPECT_NE(file_bytes(a), file_bytes(make_random_llama("det-c.gguf", spec)));
  spec.n_embd = 60;  // not a multiple of Q8_0's block
  spec.weight_type = DType::Q8_0;
  EXPECT_THROW(make_random_llama("bad.gguf", spec), Error);
}

TEST(TinyModel, TokenizerIsUsable) {
  TinyModelSpec spec;
  spec.n_vocab = 320;
  auto gguf = GgufFile::open(make_random_llama("tok.gguf", spec));
  auto tokenizer = Tokenizer::from_gguf(*gguf);
  EXPECT_EQ(tokenizer->n_vocab(), 320);
  EXPECT_EQ(tokenizer->special().bos, 1);
  EXPECT_EQ(tokenizer->special().eos, 2);
  const std::string text = "Once upon a time, the girl said \"hi\" \xC3\xA9!";  // é needs byte fallback
  const std::vector<Token> ids = tokenizer->encode(text, true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 1);
  for (Token id : ids) EXPECT_NE(id, 0) << "no <unk>: every byte has a token";
  EXPECT_EQ(tokenizer->decode(ids), text);
}

TEST(TinyModel, NoisyCopyKeepsShapesAndMovesLogitsByTheNoise) {
  const std::vector<Token> tokens = {1, 50, 60, 70, 80, 90};
  for (DType type : {DType::F32, DType::Q8_0}) {
    TinyModelSpec spec;
    spec.weight_type = type;
    const std::string src = make_random_llama(std::string("noisy-src-") + dtype_name(type) + ".gguf", spec);
    const std::string same = temp_dir() + "/noisy-0-" + dtype_name(type) + ".gguf";
    const std::string noisy = temp_dir() + "/noisy-05-" + dtype_name(type) + ".gguf";
    make_noisy_copy(src, same, 0.0f, 3);
    make_noisy_copy(src, noisy, 0.05f, 3);
    auto original = Transformer::load(src, ModelOptions{1});
    auto copy0 = Transformer::load(same, ModelOptions{1});
    auto copy = Transformer::load(noisy, ModelOptions{1});
    EXPECT_EQ(copy->gguf().metadata().size(), original->gguf().metadata().size());
    ASSERT_EQ(copy->gguf().tensors().size(), original->gguf().tensors().size());
    for (size_t i = 0; i < copy->gguf().tensors().size(); ++i) {
      const GgufTensorInfo& a = original->gguf().tensors()[i];
      const GgufTensorInfo& b = copy->gguf().tensors()[i];
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.dims, b.dims);
      EXPECT_EQ(a.type, b.type);
      EXPECT_NE(std::memcmp(a.data, b.data, a.n_bytes), 0) << a.name << " unchanged";
    }
    const std::vector<float> ref = decode_one_at_a_time(*original, tokens);
    const double rel0 = relative_rms(decode_one_at_a_time(*copy0, tokens), ref);
    const double rel = relative_rms(decode_one_at_a_time(*copy, tokens), ref);
    if (type == DType::F32) {
      EXPECT_EQ(rel0, 0.0) << "zero noise must copy F32 weights exactly";
    } else {
      EXPECT_LT(rel0, 0.02) << "zero noise only re-quantizes";
    }
    EXPECT_GT(rel, 0.005) << dtype_name(type);
    EXPECT_LT(rel, 0.5) << dtype_name(type);
    std::printf("[noisy] %s: noise 0 -> rel %.3g, noise 0.05 -> rel %.3g\n", dtype_name(type), rel0, rel);
  }
}

}  // namespace
}  // namespace specdec::testing
