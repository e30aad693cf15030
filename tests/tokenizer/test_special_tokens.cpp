// Special-token metadata: end-of-generation detection, add_bos/add_eos/add_space_prefix keys.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/testing.h"
#include "tokenizer_test_util.h"

namespace specdec {
namespace {

TEST(SpecialTokens, EndOfTurnTokensFromMetadataAndText) {
  std::vector<std::string> tokens = testing::byte_level_base_vocab();
  tokens.push_back("<|endoftext|>");  // 256
  tokens.push_back("<|im_start|>");   // 257
  tokens.push_back("<|im_end|>");     // 258
  tokens.push_back("<|custom_eot|>"); // 259
  std::vector<int32_t> types(tokens.size(), 1);
  types[256] = types[257] = 3;  // control; <|im_end|> left "normal" on purpose
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "qwen2");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_string_array("tokenizer.ggml.merges", {});
  w.set_u32("tokenizer.ggml.eos_token_id", 256);
  w.set_u32("tokenizer.ggml.eot_token_id", 259);
  w.set_u32("tokenizer.ggml.bos_token_id", 257);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_eos_token", true);
  auto tok = testing::tokenizer_from_writer(w);
  EXPECT_EQ(tok->special().eos, 256);
  EXPECT_EQ(tok->special().eot, 259);
  EXPECT_EQ(tok->special().end_of_generation, (std::vector<Token>{256, 258, 259}));
  EXPECT_TRUE(tok->is_end_of_generation(258)) << "<|im_end|> found by its text";
  EXPECT_EQ(tok->token_attr(258), TokenAttr::Control) << "end-of-turn text becomes a control token";
  EXPECT_FALSE(tok->is_end_of_generation(257));
  // add_special follows the metadata: BOS first, EOS last; control tokens decode to "".
  EXPECT_EQ(tok->encode("A", true), (std::vector<Token>{257, 'A', 256}));
  EXPECT_EQ(tok->decode({257, 'A', 258, 256}), "A");
  EXPECT_EQ(tok->decode({257, 'A', 258}, true), "<|im_start|>A<|im_end|>");
  EXPECT_EQ(tok->encode("x<|im_end|>", false, true), (std::vector<Token>{'x', 258}));
}

TEST(SpecialTokens, SentencePieceWithoutSpacePrefix) {
  SPECDEC_FIXTURE(path, "models/stories260K.gguf");
  auto source = GgufFile::open(path);
  GgufWriter w;
  for (const char* key : {"tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                          "tokenizer.ggml.token_type"}) {
    w.set(key, *source->find(key));
  }
  auto with_prefix = testing::tokenizer_from_writer(w);
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  auto without = testing::tokenizer_from_writer(w);
  EXPECT_EQ(with_prefix->encode("Once", true), (std::vector<Token>{1, 403}));
  const std::vector<Token> ids = without->encode("Once", true);
  ASSERT_FALSE(ids.empty());
  EXPECT_NE(ids.front(), 1) << "add_bos_token = false";
  EXPECT_NE(ids, (std::vector<Token>{403})) << "no '▁' prefix";
  EXPECT_EQ(without->decode(ids), "Once");
  EXPECT_EQ(without->decode(without->encode(" Once", false)), " Once") << "leading space kept";
}

}  // namespace
}  // namespace specdec
