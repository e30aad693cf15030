// Golden tokenizations from llama.cpp's test suite (../shared/fixtures/tokenizer): every input
// of NAME.gguf.inp must encode (add_special = false, parse_special = false) to the ids on the
// matching line of NAME.gguf.out, and decode back to the input.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/testing.h"
#include "tokenizer_test_util.h"

namespace specdec {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> read_inputs(const std::string& path) {
  const std::string data = read_file(path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t end = data.find(sep, pos);
    if (end == std::string::npos) break;
    inputs.push_back(data.substr(pos, end - pos));
    pos = end + sep.size();
  }
  return inputs;
}

std::vector<std::vector<Token>> read_outputs(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<Token>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<Token> ids;
    Token id;
    while (ls >> id) ids.push_back(id);
    rows.push_back(std::move(ids));
  }
  return rows;
}

struct GoldenCase {
  const char* vocab;   // fixture with the vocabulary
  const char* golden;  // fixture prefix of .inp/.out
};

class TokenizerGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(TokenizerGolden, EncodesLikeLlamaCppAndRoundTrips) {
  const GoldenCase c = GetParam();
  SPECDEC_FIXTURE(vocab_path, c.vocab);
  SPECDEC_FIXTURE(inp_path, std::string(c.golden) + ".inp");
  SPECDEC_FIXTURE(out_path, std::string(c.golden) + ".out");
  auto tok = testing::load_tokenizer(vocab_path);
  const auto inputs = read_inputs(inp_path);
  const auto expected = read_outputs(out_path);
  ASSERT_GT(inputs.size(), 10u);
  ASSERT_EQ(inputs.size(), expected.size()) << "inputs vs golden lines";
  int n_ok = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<Token> ids = tok->encode(inputs[i], /*add_special=*/false, /*parse_special=*/false);
    EXPECT_EQ(ids, expected[i]) << c.golden << " input #" << i << " '" << inputs[i] << "'";
    EXPECT_EQ(tok->decode(ids), inputs[i]) << c.golden << " round trip of input #" << i;
    n_ok += ids == expected[i];
  }
  std::printf("%s: %d/%zu golden inputs match\n", c.golden, n_ok, inputs.size());
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, TokenizerGolden,
    ::testing::Values(
        GoldenCase{"tokenizer/ggml-vocab-llama-spm.gguf", "tokenizer/ggml-vocab-llama-spm.gguf"},
        GoldenCase{"tokenizer/ggml-vocab-phi-3.gguf", "tokenizer/ggml-vocab-phi-3.gguf"},
        GoldenCase{"models/stories260K.gguf", "tokenizer/stories260K.gguf"},
        GoldenCase{"tokenizer/ggml-vocab-gpt-2.gguf", "tokenizer/ggml-vocab-gpt-2.gguf"},
        GoldenCase{"tokenizer/ggml-vocab-deepseek-coder.gguf", "tokenizer/ggml-vocab-deepseek-coder.gguf"},
        GoldenCase{"tokenizer/ggml-vocab-falcon.gguf", "tokenizer/ggml-vocab-falcon.gguf"}),
    [](const ::testing::TestParamInfo<GoldenCase>& info) {
      std::string name = info.param.golden;
      name = name.substr(name.find('/') + 1);
      for (char& ch : name) if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

TEST(TokenizerGolden, StoriesPromptWithBos) {
  SPECDEC_FIXTURE(path, "models/stories260K.gguf");
  auto tok = testing::load_tokenizer(path);
  EXPECT_EQ(tok->model_name(), "llama");
  EXPECT_EQ(tok->n_vocab(), 512);
  EXPECT_EQ(tok->encode("Once upon a time", true), (std::vector<Token>{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok->decode({1, 403, 407, 261, 378}), "Once upon a time");
  EXPECT_EQ(tok->decode({1, 403, 407}, /*render_special=*/true), "<s> Once upon");
  EXPECT_EQ(tok->special().bos, 1);
  EXPECT_EQ(tok->special().eos, 2);
  EXPECT_TRUE(tok->is_end_of_generation(2));
  EXPECT_FALSE(tok->is_end_of_generation(1));
  EXPECT_EQ(tok->special().pad, -1) << "4294967295 in the metadata means none";
}

TEST(TokenizerGolden, SpecialTokensAndEndOfGeneration) {
  SPECDEC_FIXTURE(path, "tokenizer/ggml-vocab-phi-3.gguf");
  auto tok = testing::load_tokenizer(path);
  EXPECT_EQ(tok->special().eos, 32000);
  const Token end = tok->encode("<|end|>", false, true).at(0);
  EXPECT_EQ(tok->token_text(end), "<|end|>");
  EXPECT_TRUE(tok->is_end_of_generation(end)) << "<|end|> ends a Phi-3 turn";
  EXPECT_TRUE(tok->is_end_of_generation(32000));
  // parse_special: control text is one token; without it, it is spelled out.
  EXPECT_EQ(tok->encode("<|end|>", false, true).size(), 1u);
  EXPECT_GT(tok->encode("<|end|>", false, false).size(), 1u);
  EXPECT_EQ(tok->token_to_piece(end), "");
  EXPECT_EQ(tok->token_to_piece(end, true), "<|end|>");
  EXPECT_EQ(tok->token_to_piece(-5), "");
  EXPECT_EQ(tok->token_to_piece(1 << 30), "");

  SPECDEC_FIXTURE(gpt2_path, "tokenizer/ggml-vocab-gpt-2.gguf");
  auto gpt2 = testing::load_tokenizer(gpt2_path);
  EXPECT_EQ(gpt2->model_name(), "gpt2");
  EXPECT_TRUE(gpt2->is_end_of_generation(50256));
  EXPECT_EQ(gpt2->encode("a<|endoftext|>b", false, true), (std::vector<Token>{64, 50256, 65}));
  EXPECT_FALSE(gpt2->special().add_bos) << "BPE adds no BOS unless the GGUF says so";
}

}  // namespace
}  // namespace specdec
