// Invalid UTF-8 and random input: encoding never fails, is deterministic, gives ids in range, and
// decodes back to the exact input bytes (both tokenizer families keep raw bytes); the streaming
// detokenizer only ever emits valid UTF-8.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/testing.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace specdec {
namespace {

std::string random_text(std::mt19937_64& rng) {
  static const char* const kFragments[] = {"a", " ", "  ", "\n", "é", "日本", "😀", "<s>", "</s>",
                                           "<|endoftext|>", "<|end|>", "'s", "123", "\t", "▁"};
  std::uniform_int_distribution<int> len_dist(0, 48), kind(0, 3), byte(0, 255), frag(0, 14);
  const int n = len_dist(rng);
  std::string s;
  for (int i = 0; i < n; ++i) {
    switch (kind(rng)) {
      case 0: s.push_back(static_cast<char>(byte(rng))); break;               // any byte
      case 1: s.push_back(static_cast<char>(0x80 + byte(rng) % 0x80)); break;  // high bytes
      case 2: s += kFragments[frag(rng)]; break;
      default: s.push_back(static_cast<char>('a' + byte(rng) % 26)); break;
    }
  }
  return s;
}

// exact_bytes: decode(encode(x)) == x even for invalid UTF-8 (false for vocabularies that hold
// some byte characters only as user-defined tokens, which decode as text).
void fuzz_vocabulary(const std::string& path, int n_trials, bool exact_bytes) {
  auto tok = testing::load_tokenizer(path);
  const uint64_t seed = testing::test_seed(path.c_str());
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < n_trials; ++trial) {
    const std::string text = random_text(rng);
    for (bool parse_special : {false, true}) {
      std::vector<Token> ids;
      ASSERT_NO_THROW(ids = tok->encode(text, true, parse_special)) << "seed " << seed;
      EXPECT_EQ(ids, tok->encode(text, true, parse_special)) << "not deterministic, seed " << seed;
      for (Token id : ids) ASSERT_TRUE(id >= 0 && id < tok->n_vocab()) << id;
      // SentencePiece cannot give back a literal U+2581, its space marker.
      const bool has_marker = tok->model_name() == "llama" && text.find("\xE2\x96\x81") != std::string::npos;
      if (!parse_special && !has_marker && (exact_bytes || utf8::is_valid(text))) {
        EXPECT_EQ(tok->decode(ids), text) << "round trip, seed " << seed;
      }
      StreamingDetokenizer detok(*tok);
      std::string streamed;
      for (Token id : ids) {
        const std::string chunk = detok.push(id);
        ASSERT_TRUE(utf8::is_valid(chunk)) << "seed " << seed;
        streamed += chunk;
      }
      streamed += detok.flush();
      ASSERT_TRUE(utf8::is_valid(streamed));
      if (utf8::is_valid(text) && !parse_special && !has_marker) {
        EXPECT_EQ(streamed, text) << "seed " << seed;
      }
    }
  }
}

TEST(InvalidUtf8, RandomBytesSentencePiece) {
  SPECDEC_FIXTURE(path, "models/stories260K.gguf");
  fuzz_vocabulary(path, 400 / testing::sanitizer_slowdown(), true);
}

TEST(InvalidUtf8, RandomBytesByteLevelBpe) {
  SPECDEC_FIXTURE(gpt2, "tokenizer/ggml-vocab-gpt-2.gguf");
  fuzz_vocabulary(gpt2, 300 / testing::sanitizer_slowdown(), true);
  SPECDEC_FIXTURE(deepseek, "tokenizer/ggml-vocab-deepseek-coder.gguf");
  fuzz_vocabulary(deepseek, 200 / testing::sanitizer_slowdown(), false);
}

TEST(InvalidUtf8, DocumentedBehaviour) {
  SPECDEC_FIXTURE(path, "tokenizer/ggml-vocab-gpt-2.gguf");
  auto tok = testing::load_tokenizer(path);
  // A lone continuation byte is pre-tokenized as U+FFFD but encoded as its own byte: 0x80 is
  // GPT-2's byte character U+0122 "Ģ" (token 222).
  EXPECT_EQ(tok->encode("\x80", false), (std::vector<Token>{222}));
  EXPECT_EQ(tok->decode(tok->encode("ab\xC3(cd", false)), "ab\xC3(cd");
  SPECDEC_FIXTURE(spm_path, "models/stories260K.gguf");
  auto spm = testing::load_tokenizer(spm_path);
  // SentencePiece: the bad byte becomes its byte-fallback token <0xC3> (id 3 + 0xC3).
  const std::vector<Token> ids = spm->encode("\xC3", false);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(spm->token_text(ids[1]), "<0xC3>");
}

TEST(Utf8, InspectFollowsTheStandard) {
  using utf8::SeqStatus;
  EXPECT_EQ(utf8::inspect("\xC0\x80", 0).status, SeqStatus::Invalid);       // overlong
  EXPECT_EQ(utf8::inspect("\xE0\x80\x80", 0).status, SeqStatus::Invalid);   // overlong
  EXPECT_EQ(utf8::inspect("\xED\xA0\x80", 0).status, SeqStatus::Invalid);   // surrogate
  EXPECT_EQ(utf8::inspect("\xF4\x90\x80\x80", 0).status, SeqStatus::Invalid);  // > U+10FFFF
  EXPECT_EQ(utf8::inspect("\xF0\x9F\x98", 0).status, SeqStatus::Incomplete);
  const utf8::Seq ok = utf8::inspect("\xF0\x9F\x98\x80", 0);
  EXPECT_EQ(ok.status, SeqStatus::Valid);
  EXPECT_EQ(ok.codepoint, 0x1F600u);
  EXPECT_EQ(utf8::sanitize("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
}

}  // namespace
}  // namespace specdec
