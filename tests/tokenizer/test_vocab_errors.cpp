// Tokenizers built from small in-memory GGUFs: merge ranks, and clear errors for inconsistent
// tables (merges naming unknown tokens, wrong table sizes, unknown model or pre-tokenizer).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "specdec/error.h"
#include "common/testing.h"
#include "tokenizer/byte_level.h"
#include "tokenizer_test_util.h"

namespace specdec {
namespace testing {

std::vector<std::string> byte_level_base_vocab() {
  std::vector<std::string> vocab;
  for (int b = 0; b < 256; ++b) vocab.push_back(tok::byte_to_utf8(static_cast<uint8_t>(b)));
  return vocab;
}

}  // namespace testing

namespace {

GgufWriter bpe_writer(std::vector<std::string> extra, const std::vector<std::string>& merges,
                      const std::string& pre = "gpt-2") {
  std::vector<std::string> tokens = testing::byte_level_base_vocab();
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", pre);
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_string_array("tokenizer.ggml.merges", merges);
  return w;
}

std::string error_of(const GgufWriter& w) {
  try {
    testing::tokenizer_from_writer(w);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(BpeMerges, LowestRankMergesFirst) {
  // ids: 256 "ab", 257 "bc", 258 "abc"; "b c" has the best rank, so "abc" = a + bc -> abc.
  auto tok = testing::tokenizer_from_writer(bpe_writer({"ab", "bc", "abc"}, {"b c", "a b", "a bc"}));
  EXPECT_EQ(tok->encode("abc", false), (std::vector<Token>{258}));
  EXPECT_EQ(tok->encode("ab", false), (std::vector<Token>{256}));
  EXPECT_EQ(tok->encode("abab", false), (std::vector<Token>{256, 256}));
  // With "a b" ranked first, "abc" becomes ab + c (no "ab c" merge).
  auto tok2 = testing::tokenizer_from_writer(bpe_writer({"ab", "bc", "abc"}, {"a b", "b c", "a bc"}));
  EXPECT_EQ(tok2->encode("abc", false), (std::vector<Token>{256, 'c'}));
  // Words are split before merging; the space ("Ġ", id 32 here) stays alone.
  EXPECT_EQ(tok->encode("ab ab", false), (std::vector<Token>{256, ' ', 256}));
  EXPECT_EQ(tok->decode(tok->encode("ab abc\n", false)), "ab abc\n");
}

TEST(BpeMerges, MergeReferencingUnknownTokenIsAnError) {
  const std::string msg = error_of(bpe_writer({"ab"}, {"a b", "a zz"}));
  EXPECT_NE(msg.find("tokenizer.ggml.merges[1]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'zz'"), std::string::npos) << msg;
  const std::string msg2 = error_of(bpe_writer({"ab"}, {"a b", "b c"}));  // "bc" missing
  EXPECT_NE(msg2.find("'bc'"), std::string::npos) << msg2;
  const std::string msg3 = error_of(bpe_writer({"ab"}, {"ab"}));
  EXPECT_NE(msg3.find("not of the form"), std::string::npos) << msg3;
}

TEST(BpeMerges, UnknownModelOrPreTokenizerIsAnError) {
  const std::string pre = error_of(bpe_writer({}, {}, "no-such-pre"));
  EXPECT_NE(pre.find("no-such-pre"), std::string::npos) << pre;
  EXPECT_NE(pre.find("qwen2"), std::string::npos) << "lists the supported names: " << pre;

  GgufWriter w = bpe_writer({}, {});
  w.set_string("tokenizer.ggml.model", "wordpiece");
  const std::string model = error_of(w);
  EXPECT_NE(model.find("wordpiece"), std::string::npos) << model;
}

TEST(BpeMerges, TableSizeMismatchIsAnError) {
  GgufWriter w = bpe_writer({}, {});
  w.set_i32_array("tokenizer.ggml.token_type", std::vector<int32_t>(10, 1));
  const std::string msg = error_of(w);
  EXPECT_NE(msg.find("token_type has 10 entries"), std::string::npos) << msg;

  GgufWriter w2 = bpe_writer({}, {});
  std::vector<int32_t> types(256, 1);
  types[7] = 42;
  w2.set_i32_array("tokenizer.ggml.token_type", types);
  const std::string msg2 = error_of(w2);
  EXPECT_NE(msg2.find("token_type[7] = 42"), std::string::npos) << msg2;
}

TEST(BpeMerges, EveryPreTokenizerCompilesAndSplits) {
  for (const char* pre : {"default", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder",
                                 "deepseek-v3", "falcon", "starcoder", "refact", "mpt", "smollm",
                                 "gpt-2", "bloom", "viking", "tekken", "gpt-4o", "command-r"}) {
    auto tok = testing::tokenizer_from_writer(bpe_writer({"ab"}, {"a b"}, pre));
    const std::string text = "Hello, y'all! 12345 日本語  \n\n  tabs\there ÀÉ 🦙";
    EXPECT_EQ(tok->decode(tok->encode(text, false)), text) << pre;
  }
}

TEST(SpmVocabulary, ByteTokenWithBadTextIsAnError) {
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "<0xZZ>", "a"});
  w.set_f32_array("tokenizer.ggml.scores", {0, 0, 0, 0, -1});
  w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 6, 1});
  const std::string msg = error_of(w);
  EXPECT_NE(msg.find("<0xZZ>"), std::string::npos) << msg;

  GgufWriter w2;
  w2.set_string("tokenizer.ggml.model", "llama");
  w2.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
  w2.set_f32_array("tokenizer.ggml.scores", {0, 0});
  const std::string msg2 = error_of(w2);
  EXPECT_NE(msg2.find("scores has 2 entries"), std::string::npos) << msg2;
}

}  // namespace
}  // namespace specdec
