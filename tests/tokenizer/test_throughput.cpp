// Encoding throughput on 1 MB of text (BPE; 256 KB for SentencePiece, which has no pre-split
// and runs one merge queue over the whole text, as llama.cpp does) (printed, never asserted: timings are not test results).
// The text is made of words drawn from the GPT-2 vocabulary with a seeded RNG, plus digits,
// punctuation and newlines, so it has natural-text-like repetition and many distinct words.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/testing.h"
#include "tokenizer_test_util.h"

namespace specdec {
namespace {

std::string make_text(const Tokenizer& words_from, size_t n_bytes, uint64_t seed) {
  std::vector<std::string> words;
  for (Token id = 0; id < words_from.n_vocab(); ++id) {
    std::string piece = words_from.token_to_piece(id);
    if (piece.size() >= 3 && piece[0] == ' ' && isalpha(static_cast<unsigned char>(piece[1]))) {
      words.push_back(piece);
    }
  }
  std::mt19937_64 rng(seed);
  // Zipf-like: low indices much more frequent (natural text reuses common words).
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::uniform_int_distribution<int> punct(0, 19);
  std::string text;
  text.reserve(n_bytes + 64);
  while (text.size() < n_bytes) {
    const double r = u(rng);
    const size_t index = static_cast<size_t>(r * r * r * static_cast<double>(words.size()));
    text += words[index];
    switch (punct(rng)) {
      case 0: text += ","; break;
      case 1: text += ".\n"; break;
      case 2: text += " " + std::to_string(static_cast<int>(u(rng) * 100000)); break;
      case 3: text += "'s"; break;
      default: break;
    }
  }
  text.resize(n_bytes);
  return text;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(TokenizerThroughput, BpeEncodeOneMegabyte) {
  SPECDEC_FIXTURE(path, "tokenizer/ggml-vocab-gpt-2.gguf");
  auto tok = testing::load_tokenizer(path);
  const size_t n_bytes = (1u << 20) / static_cast<size_t>(testing::sanitizer_slowdown());
  const std::string text = make_text(*tok, n_bytes, testing::test_seed("bpe throughput text"));
  auto t0 = std::chrono::steady_clock::now();
  const std::vector<Token> cold = tok->encode(text, false);
  const double cold_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  const std::vector<Token> warm = tok->encode(text, false);
  const double warm_s = seconds_since(t0);
  EXPECT_EQ(cold, warm) << "the word cache must not change results";
  EXPECT_EQ(tok->decode(cold), text);
  std::printf("BPE (gpt-2) encode of %zu bytes -> %zu tokens: first pass %.3f s (%.0f tokens/s, "
              "%.2f MB/s), cached pass %.3f s (%.0f tokens/s)\n",
              text.size(), cold.size(), cold_s, static_cast<double>(cold.size()) / cold_s,
              static_cast<double>(text.size()) / cold_s / 1e6, warm_s,
              static_cast<double>(warm.size()) / warm_s);
}

TEST(TokenizerThroughput, SpmEncodeQuarterMegabyte) {
  SPECDEC_FIXTURE(path, "tokenizer/ggml-vocab-llama-spm.gguf");
  SPECDEC_FIXTURE(gpt2_path, "tokenizer/ggml-vocab-gpt-2.gguf");
  auto tok = testing::load_tokenizer(path);
  auto words = testing::load_tokenizer(gpt2_path);
  const size_t n_bytes = (1u << 18) / static_cast<size_t>(testing::sanitizer_slowdown());
  const std::string text = make_text(*words, n_bytes, testing::test_seed("spm throughput text"));
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<Token> ids = tok->encode(text, false);
  const double s = seconds_since(t0);
  EXPECT_EQ(tok->decode(ids), text);
  std::printf("SPM (llama) encode of %zu bytes -> %zu tokens: %.3f s (%.0f tokens/s)\n", text.size(),
              ids.size(), s, static_cast<double>(ids.size()) / s);
}

}  // namespace
}  // namespace specdec
