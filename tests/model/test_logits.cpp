// Logits against llama.cpp's on the shared fixtures (tolerances from ../shared/README.md),
// and greedy generation reproducing the golden stories260K text.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "common/testing.h"
#include "model/model_test_util.h"
#include "specdec/gguf.h"
#include "specdec/model.h"
#include "specdec/tokenizer.h"

namespace specdec::testing {
namespace {

struct LogitsCase {
  const char* model;
  const char* logits;
  double max_relative_rms;
  bool argmax_must_match;
  DType kv_type = DType::F32;  // llama.cpp's own default is F16
};

void check_against_llama_cpp(const LogitsCase& c) {
  SPECDEC_FIXTURE(model_path, c.model);
  SPECDEC_FIXTURE(logits_path, c.logits);
  auto model = Transformer::load(model_path, ModelOptions{2, c.kv_type});
  const std::vector<float> expected = read_f32_file(logits_path);
  const int n_vocab = model->config().n_vocab;
  ASSERT_EQ(expected.size(), reference_tokens().size() * static_cast<size_t>(n_vocab));
  const std::vector<float> got = decode_one_at_a_time(*model, reference_tokens());
  const double rel = relative_rms(got, expected);
  std::printf("[logits] %s (KV %s): relative RMS %.3g (bound %.3g)\n", c.model, dtype_name(c.kv_type), rel,
              c.max_relative_rms);
  EXPECT_LE(rel, c.max_relative_rms) << c.model;
  int n_argmax_differ = 0;
  for (size_t i = 0; i < reference_tokens().size(); ++i) {
    const size_t offset = i * static_cast<size_t>(n_vocab);
    if (argmax(got.data() + offset, n_vocab) != argmax(expected.data() + offset, n_vocab)) ++n_argmax_differ;
  }
  if (c.argmax_must_match) {
    EXPECT_EQ(n_argmax_differ, 0) << c.model;
  }
}

void PrintTo(const LogitsCase& c, std::ostream* os) { *os << c.model; }

class LlamaCppLogits : public ::testing::TestWithParam<LogitsCase> {};

TEST_P(LlamaCppLogits, WithinTolerance) { check_against_llama_cpp(GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    Fixtures, LlamaCppLogits,
    ::testing::Values(LogitsCase{"models/stories260K.gguf", "models/stories260K.logits.f32", 2e-3, true},
                      LogitsCase{"quant/tiny-f32.gguf", "quant/logits-f32.f32", 2e-3, true},
                      LogitsCase{"quant/tiny-F16.gguf", "quant/logits-F16.f32", 3e-3, true},
                      LogitsCase{"quant/tiny-BF16.gguf", "quant/logits-BF16.f32", 2.5e-2, false},
                      LogitsCase{"quant/tiny-Q8_0.gguf", "quant/logits-Q8_0.f32", 0.12, false},
                      LogitsCase{"arch/tiny-qwen2.gguf", "arch/logits-qwen2.f32", 2e-3, true},
                      LogitsCase{"arch/tiny-llama3rope.gguf", "arch/logits-llama3rope.f32", 2e-3, true},
                      LogitsCase{"models/stories260K.gguf", "models/stories260K.logits.f32", 2e-3, true, DType::F16},
                      LogitsCase{"quant/tiny-Q8_0.gguf", "quant/logits-Q8_0.f32", 0.12, false, DType::F16},
                      LogitsCase{"arch/tiny-qwen2.gguf", "arch/logits-qwen2.f32", 2e-3, true, DType::F16}),
    [](const ::testing::TestParamInfo<LogitsCase>& info) {
      std::string name = info.param.logits;
      std::string out;
      for (char ch : name.substr(name.find('/') + 1)) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return info.param.kv_type == DType::F16 ? out + "_kv_f16" : out;
    });

// Further quantized types: same bound, enabled as their dequantizers and matmuls land.
class LlamaCppLogitsQuant : public ::testing::TestWithParam<const char*> {};

TEST_P(LlamaCppLogitsQuant, WithinTolerance) {
  const std::string type = GetParam();
  const std::string model = "quant/tiny-" + type + ".gguf";
  const std::string logits = "quant/logits-" + type + ".f32";
  check_against_llama_cpp(LogitsCase{model.c_str(), logits.c_str(), 0.12, false});
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LlamaCppLogitsQuant,
                         ::testing::Values("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K",
                                           "Q6_K", "Q4_K_M"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

TEST(Generation, GreedyStories260KMatchesGoldenText) {
  SPECDEC_FIXTURE(model_path, "models/stories260K.gguf");
  SPECDEC_FIXTURE(golden_path, "models/stories260K.greedy.once-upon-a-time.txt");
  auto model = Transformer::load(model_path, ModelOptions{1});
  auto tokenizer = Tokenizer::from_gguf(model->gguf());
  const std::vector<Token> prompt = {1, 403, 407, 261, 378};  // "<s> Once upon a time"
  ASSERT_EQ(tokenizer->encode("Once upon a time", true), prompt);
  const int n_generate = 120;

  KvCache cache = model->new_cache();
  KvCache* caches[] = {&cache};
  Batch batch;
  Logits logits;
  for (size_t i = 0; i < prompt.size(); ++i) {
    batch.add(prompt[i], static_cast<int32_t>(i), static_cast<int32_t>(i) - 1, 0, i + 1 == prompt.size());
  }
  std::vector<Token> ids = prompt;
  for (int step = 0; step < n_generate; ++step) {
    model->forward(batch, caches, logits);
    ASSERT_EQ(logits.n_rows(), 1);
    const Token next = argmax(logits.row(0), logits.n_vocab);
    ids.push_back(next);
    batch.clear();
    batch.add(next, static_cast<int32_t>(ids.size()) - 1, -1, 0, true);
  }
  std::ifstream in(golden_path, std::ios::binary);
  std::stringstream golden;
  golden << in.rdbuf();
  std::string expected = golden.str();
  // llama-simple prints BOS as "<s> " and a newline after the generation.
  ASSERT_EQ(expected.rfind("<s> ", 0), 0u);
  expected = expected.substr(4);
  const std::string text = tokenizer->decode(ids);
  if (!expected.empty() && expected.back() == '\n' && (text.empty() || text.back() != '\n')) expected.pop_back();
  EXPECT_EQ(text, expected);
}

}  // namespace
}  // namespace specdec::testing
