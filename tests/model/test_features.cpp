// Features (docs/HEADS.md): the final hidden state after output_norm of the rows that ask, and
// chosen layers' residual streams. Batch invariant, output_head(feature) == the row's logits;
// the target fingerprint matches an independent FNV-1a and changes with the vocabulary.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "common/testing.h"
#include "common/tiny_model.h"
#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/heads.h"
#include "specdec/model.h"
#include "specdec/rng.h"

namespace specdec {
namespace {

std::unique_ptr<Transformer> tiny_target(const char* name, int n_vocab) {
  testing::TinyModelSpec spec;
  spec.n_vocab = n_vocab;
  spec.n_embd = 32;
  spec.n_layers = 2;
  spec.n_heads = 2;
  spec.n_kv_heads = 1;
  spec.n_ff = 32;
  spec.n_ctx = 64;
  spec.seed = 31;
  ModelOptions options;
  options.n_threads = 2;
  return Transformer::load(testing::make_random_llama(name, spec), options);
}

// Features of `tokens` decoded as a chain in one batch (every row asks), layers 0 and 1 too.
Features chain_features(Transformer& model, const std::vector<Token>& tokens, Logits* logits) {
  KvCache cache = model.new_cache();
  Batch batch;
  for (size_t i = 0; i < tokens.size(); ++i) batch.add(tokens[i], static_cast<int32_t>(i), static_cast<int32_t>(i) - 1, 0, true, true);
  Features features;
  features.layers = {1, 0};
  KvCache* caches[] = {&cache};
  model.forward(batch, caches, *logits, &features);
  return features;
}

TEST(Features, BitIdenticalAloneAndInBatchAndReproduceLogits) {
  auto model = tiny_target("features_target.gguf", 40);
  const uint64_t seed = testing::test_seed("Features.BatchInvariant");
  Rng rng(seed);
  std::vector<Token> tokens(12);
  for (Token& t : tokens) t = static_cast<Token>(rng.below(40));
  Logits logits;
  const Features all = chain_features(*model, tokens, &logits);
  const int n_embd = model->config().n_embd;
  ASSERT_EQ(all.n_rows(), 12);
  ASSERT_EQ(all.n_embd, n_embd);
  // Output(feature) == logits, bit for bit.
  std::vector<float> out(static_cast<size_t>(12) * 40);  // (12, n_vocab)
  model->output_head(all.final.data(), 12, out.data());
  EXPECT_EQ(0, std::memcmp(out.data(), logits.data.data(), sizeof(float) * out.size()));
  // One row at a time after a cached prefix; only that row asks, the rest of the batch varies.
  for (size_t i = 0; i < tokens.size(); ++i) {
    KvCache cache = model->new_cache();
    Batch batch;
    for (size_t j = 0; j <= i; ++j) batch.add(tokens[j], static_cast<int32_t>(j), static_cast<int32_t>(j) - 1, 0, false, j == i);
    Features one;
    one.layers = {0};
    Logits unused;
    KvCache* caches[] = {&cache};
    model->forward(batch, caches, unused, &one);
    ASSERT_EQ(one.n_rows(), 1);
    EXPECT_EQ(one.batch_row[0], static_cast<int32_t>(i));
    EXPECT_EQ(0, std::memcmp(one.row(0), all.row(static_cast<int>(i)), sizeof(float) * n_embd)) << "row " << i;
    EXPECT_EQ(0, std::memcmp(one.layer_row(0, 0), all.layer_row(static_cast<int>(i), 1), sizeof(float) * n_embd));
  }
  // The last layer's residual, normalised, is the feature: it differs from it (a norm applies).
  EXPECT_NE(0, std::memcmp(all.layer_row(0, 0), all.row(0), sizeof(float) * n_embd));
}

TEST(Features, NoRowAskingLeavesTheBatchUntouchedAndErrorsAreClear) {
  auto model = tiny_target("features_target.gguf", 40);
  Batch batch;
  batch.add(3, 0, -1, 0, true);
  EXPECT_TRUE(batch.want_features.empty());  // no row asks: nothing is computed or stored
  batch.add(4, 1, 0, 0, true, true);
  ASSERT_EQ(batch.want_features.size(), 2u);
  EXPECT_EQ(batch.want_features[0], 0);
  KvCache cache = model->new_cache();
  KvCache* caches[] = {&cache};
  Logits logits;
  EXPECT_THROW(model->forward(batch, caches, logits, nullptr), Error);
  EXPECT_EQ(cache.size(), 0);
  Features bad;
  bad.layers = {2};
  try {
    model->forward(batch, caches, logits, &bad);
    FAIL() << "layer 2 of 2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.size(), 0);
}

// FNV-1a 64 written out independently of the library.
uint64_t fnv1a(const std::vector<uint8_t>& bytes) {
  uint64_t h = 14695981039346656037ULL;
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 1099511628211ULL;
  }
  return h;
}

TEST(TargetFingerprint, IsFnv1aOfTokensAndShapesAndChangesWithTheVocabulary) {
  auto model = tiny_target("features_target.gguf", 40);
  std::vector<uint8_t> bytes;
  for (const std::string& t : model->gguf().get_string_array("tokenizer.ggml.tokens")) {
    bytes.insert(bytes.end(), t.begin(), t.end());
    bytes.push_back(0);
  }
  const std::string shapes = "n_vocab=40,n_embd=32,n_layers=2,n_heads=2,n_kv_heads=1,n_ff=32";
  bytes.insert(bytes.end(), shapes.begin(), shapes.end());
  char expected[17];
  std::snprintf(expected, sizeof(expected), "%016llx", static_cast<unsigned long long>(fnv1a(bytes)));
  EXPECT_EQ(target_fingerprint(*model), expected);

  auto other = tiny_target("features_target41.gguf", 41);
  EXPECT_NE(target_fingerprint(*other), target_fingerprint(*model));
  // Same shapes, one token's text changed.
  std::vector<std::string> tokens = model->gguf().get_string_array("tokenizer.ggml.tokens");
  EXPECT_EQ(target_fingerprint(tokens, model->config()), expected);
  tokens.back() += "x";
  EXPECT_NE(target_fingerprint(tokens, model->config()), expected);
}

}  // namespace
}  // namespace specdec
