// Pre-tokenizer regex lists split text the way llama.cpp's (and the original HF) regexes do.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "specdec/error.h"
#include "tokenizer/bpe_pretokenize.h"

namespace specdec {
namespace {

std::vector<std::string> split(const std::string& pre, const std::string& text) {
  tok::PreTokenizer splitter(tok::pre_tokenizer_config(pre, "test").regexes);
  std::vector<std::string> pieces;
  for (const auto& [offset, length] : splitter.split(text)) pieces.push_back(text.substr(offset, length));
  return pieces;
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizer, Gpt2) {
  EXPECT_EQ(split("gpt-2", "Hello world 12345!!\n\n"),
            (Pieces{"Hello", " world", " 12345", "!!", "\n\n"}));
  EXPECT_EQ(split("gpt-2", "   Hello"), (Pieces{"  ", " Hello"}));
  EXPECT_EQ(split("gpt-2", "it's we'LL"), (Pieces{"it", "'s", " we", "'", "LL"}));
}

TEST(PreTokenizer, Llama3GroupsDigitsByThreeAndContractionsIgnoreCase) {
  EXPECT_EQ(split("llama-bpe", "Hello world 12345!!\n\n"),
            (Pieces{"Hello", " world", " ", "123", "45", "!!\n\n"}));
  EXPECT_EQ(split("llama-bpe", "we'LL go"), (Pieces{"we", "'LL", " go"}));
  EXPECT_EQ(split("llama-bpe", "a\n\n\nb"), (Pieces{"a", "\n\n\n", "b"}));
}

TEST(PreTokenizer, Qwen2SingleDigits) {
  EXPECT_EQ(split("qwen2", "x 2024年"), (Pieces{"x", " ", "2", "0", "2", "4", "年"}));
}

TEST(PreTokenizer, StarcoderAndSmollmIsolateDigitsFirst) {
  EXPECT_EQ(split("smollm", "abc 123"), (Pieces{"abc", " ", "1", "2", "3"}));
}

TEST(PreTokenizer, DeepseekCoderAndFalcon) {
  EXPECT_EQ(split("deepseek-coder", "foo(bar)\n"), (Pieces{"foo", "(", "bar", ")", "\n"}));
  EXPECT_EQ(split("falcon", "1234567"), (Pieces{"123", "456", "7"}));
}

TEST(PreTokenizer, PiecesCoverTheText) {
  const std::string text = "  Ünïcödé — 日本語テキスト 🦙🦙\t\r\n x=1+2;  ";
  for (const std::string& pre : tok::supported_pre_tokenizers()) {
    const auto pieces = split(pre, text);
    std::string joined;
    for (const auto& p : pieces) {
      EXPECT_FALSE(p.empty()) << pre;
      joined += p;
    }
    EXPECT_EQ(joined, text) << pre;
  }
}

TEST(PreTokenizer, UnknownNameListsSupported) {
  try {
    tok::pre_tokenizer_config("nope", "file.gguf");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("file.gguf"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("llama-bpe"), std::string::npos);
  }
}

}  // namespace
}  // namespace specdec
