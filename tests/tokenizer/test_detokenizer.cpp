// StreamingDetokenizer: never emits part of a UTF-8 sequence, drops SentencePiece's leading
// space, turns invalid bytes into U+FFFD, and concatenates to decode() for valid text.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/testing.h"
#include "tokenizer/utf8.h"
#include "tokenizer_test_util.h"

namespace specdec {
namespace {

// Streams `ids` and checks each emitted chunk is valid UTF-8; returns the concatenation.
std::string stream_all(const Tokenizer& tok, const std::vector<Token>& ids, std::vector<std::string>* chunks = nullptr) {
  StreamingDetokenizer detok(tok);
  std::string text;
  for (Token id : ids) {
    const std::string chunk = detok.push(id);
    EXPECT_TRUE(utf8::is_valid(chunk)) << "token " << id << " emitted a partial sequence";
    if (chunks) chunks->push_back(chunk);
    text += chunk;
  }
  text += detok.flush();
  return text;
}

const char* const kMultibyteTexts[] = {
    "Hello 😀 world",                          // 4-byte emoji
    "🦙🦙 llamas",                              // repeated emoji
    "👨‍👩‍👧 family",                            // ZWJ sequence
    "naïve café — 日本語のテキスト",               // 2- and 3-byte characters
    "ស្ថានីយ៍ 🇫🇷 flags",                        // Khmer, regional indicators
    "\xF0\x9F\x8D\x95 pizza\n\ttabs  and   spaces",
};

TEST(StreamingDetokenizer, SpmByteFallbackEmojiIsHeldUntilComplete) {
  SPECDEC_FIXTURE(path, "models/stories260K.gguf");
  auto tok = testing::load_tokenizer(path);
  const std::vector<Token> ids = tok->encode("😀", false);
  // "▁" then the four byte tokens of U+1F600 (the 512-token vocabulary has no emoji).
  ASSERT_EQ(ids.size(), 5u);
  std::vector<std::string> chunks;
  EXPECT_EQ(stream_all(*tok, ids, &chunks), "😀");
  ASSERT_EQ(chunks.size(), 5u);
  EXPECT_EQ(chunks[0], "") << "leading space of SentencePiece text is dropped";
  EXPECT_EQ(chunks[1], "");
  EXPECT_EQ(chunks[2], "");
  EXPECT_EQ(chunks[3], "");
  EXPECT_EQ(chunks[4], "😀");
}

TEST(StreamingDetokenizer, ConcatenationEqualsTextForEveryVocabulary) {
  const char* const vocabs[] = {"models/stories260K.gguf", "tokenizer/ggml-vocab-llama-spm.gguf",
                                "tokenizer/ggml-vocab-gpt-2.gguf", "tokenizer/ggml-vocab-falcon.gguf",
                                "tokenizer/ggml-vocab-deepseek-coder.gguf"};
  for (const char* vocab : vocabs) {
    SPECDEC_FIXTURE(path, vocab);
    auto tok = testing::load_tokenizer(path);
    for (const char* text : kMultibyteTexts) {
      const std::vector<Token> ids = tok->encode(text, /*add_special=*/true);
      EXPECT_EQ(stream_all(*tok, ids), text) << vocab;
      EXPECT_EQ(tok->decode(ids), text) << vocab;
    }
  }
}

TEST(StreamingDetokenizer, BpeEmojiSplitAcrossTokens) {
  SPECDEC_FIXTURE(path, "tokenizer/ggml-vocab-gpt-2.gguf");
  auto tok = testing::load_tokenizer(path);
  const std::vector<Token> ids = tok->encode("🦙", false);
  ASSERT_GT(ids.size(), 1u) << "GPT-2 spells the llama emoji with several byte tokens";
  std::vector<std::string> chunks;
  EXPECT_EQ(stream_all(*tok, ids, &chunks), "🦙");
  for (size_t i = 0; i + 1 < chunks.size(); ++i) EXPECT_EQ(chunks[i], "");
}

TEST(StreamingDetokenizer, InvalidBytesBecomeReplacementCharacters) {
  SPECDEC_FIXTURE(path, "models/stories260K.gguf");
  auto tok = testing::load_tokenizer(path);
  auto byte_token = [&](int b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    for (Token id = 0; id < tok->n_vocab(); ++id) if (tok->token_text(id) == name) return id;
    return Token{-1};
  };
  const std::string fffd = "\xEF\xBF\xBD";
  StreamingDetokenizer detok(*tok);
  EXPECT_EQ(detok.push(byte_token(0xFF)), fffd);                // never valid
  EXPECT_EQ(detok.push(byte_token(0xE2)), "");                  // could start a 3-byte sequence
  EXPECT_EQ(detok.push(byte_token('A')), fffd + "A");           // ... but did not
  EXPECT_EQ(detok.push(byte_token(0xF0)), "");
  EXPECT_EQ(detok.push(byte_token(0x9F)), "");
  EXPECT_EQ(detok.flush(), fffd + fffd) << "incomplete tail at the end";
  EXPECT_EQ(detok.flush(), "");
  detok.reset();
  const std::vector<Token> hello = tok->encode("Hello", true);
  std::string text;
  for (Token id : hello) text += detok.push(id);
  EXPECT_EQ(text, "Hello") << "after reset the leading space is dropped again";
}

}  // namespace
}  // namespace specdec
