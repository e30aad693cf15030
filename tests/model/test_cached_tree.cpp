// Token trees kept in the cache between forwards (Batch::visible_prefix / cache_ancestors, used
// by the draft model's tree expansion): forwarding a tree level by level, siblings and cousins
// side by side in the cache, gives every node the logits and K/V of its path decoded as a
// chain, bit for bit; keep_rows of one path then equals a fresh run; bad rows are rejected.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/testing.h"
#include "common/tiny_model.h"
#include "model/model_test_util.h"
#include "specdec/error.h"
#include "specdec/model.h"
#include "specdec/rng.h"

namespace specdec::testing {
namespace {

bool same_kv(const KvCache& a, int slot_a, const KvCache& b, int slot_b) { return a.same_slot(slot_a, b, slot_b); }

class CachedTree : public ::testing::Test {
 protected:
  void SetUp() override {
    TinyModelSpec spec;
    spec.n_ctx = 64;
    spec.seed = 31;
    spec.weight_scale = 2.0f;
    model_ = Transformer::load(make_random_llama("cached-tree.gguf", spec), ModelOptions{2});
    Rng rng(test_seed("CachedTree"));
    for (int i = 0; i < 6; ++i) context_.push_back(static_cast<Token>(3 + rng.below(290)));
    for (int i = 0; i < kNodes; ++i) tokens_[i] = static_cast<Token>(3 + rng.below(290));
  }

  // Prefills the context into `cache`.
  void prefill(KvCache& cache) {
    Batch b;
    for (size_t i = 0; i < context_.size(); ++i) b.add(context_[i], static_cast<int32_t>(i), static_cast<int32_t>(i) - 1, 0, false);
    Logits out;
    KvCache* caches[] = {&cache};
    model_->forward(b, caches, out);
  }
  std::vector<Token> path_of(int node) const {
    std::vector<Token> path;
    for (int a = node; a >= 0; a = kParent[a]) path.insert(path.begin(), tokens_[a]);
    return path;
  }

  // Node i's parent (-1: the root). Levels: {0, 1}, {2, 3, 4}, {5, 6, 7}, and 8 under 7 in the
  // same forward as 7 (a batch parent below a cached parent).
  static constexpr int kNodes = 9;
  static constexpr int kParent[kNodes] = {-1, -1, 0, 1, 0, 3, 2, 4, 7};
  std::unique_ptr<Transformer> model_;
  std::vector<Token> context_;
  Token tokens_[kNodes] = {};
};

TEST_F(CachedTree, LevelByLevelEqualsEachPathAsAChainBitForBit) {
  KvCache cache = model_->new_cache();
  prefill(cache);
  const int n_ctx = static_cast<int>(context_.size());
  const std::vector<std::vector<int>> levels = {{0, 1}, {3, 2, 4}, {5, 7, 8, 6}};
  std::vector<int> slot(kNodes, -1);
  std::vector<std::vector<float>> logits(kNodes);  // (kNodes, n_vocab)
  const int n_vocab = model_->config().n_vocab;
  for (const auto& level : levels) {
    Batch b;
    std::vector<int> row_of(kNodes, -1);
    for (int node : level) {
      const int parent = kParent[node];
      std::vector<int32_t> ancestors;
      const bool batch_parent = parent >= 0 && row_of[parent] >= 0;
      int depth = 0;
      for (int a = parent; a >= 0; a = kParent[a]) ++depth;
      if (!batch_parent) {
        for (int a = parent; a >= 0; a = kParent[a]) ancestors.insert(ancestors.begin(), slot[a]);
      }
      row_of[node] = b.size();
      b.add_cached_tree_row(tokens_[node], n_ctx + depth, batch_parent ? row_of[parent] : -1, 0, true, n_ctx, ancestors);
    }
    const int first = cache.size();
    Logits out;
    KvCache* caches[] = {&cache};
    model_->forward(b, caches, out);
    for (int node : level) {
      slot[node] = first + row_of[node];
      logits[node].assign(out.row(row_of[node]), out.row(row_of[node]) + n_vocab);
    }
  }
  for (int node = 0; node < kNodes; ++node) {
    std::vector<Token> chain = context_;
    const std::vector<Token> path = path_of(node);
    chain.insert(chain.end(), path.begin(), path.end());
    KvCache fresh = model_->new_cache();
    const std::vector<float> expected = decode_one_at_a_time(*model_, chain, &fresh);
    EXPECT_EQ(std::memcmp(logits[node].data(), expected.data() + (chain.size() - 1) * n_vocab, sizeof(float) * n_vocab), 0)
        << "logits of node " << node;
    EXPECT_TRUE(same_kv(cache, slot[node], fresh, static_cast<int>(chain.size()) - 1)) << "K/V of node " << node;
  }
  // Keep the path 1 -> 3 -> 5 (not the first branch): the cache equals a fresh chain run.
  const std::vector<int> keep = {slot[1] - n_ctx, slot[3] - n_ctx, slot[5] - n_ctx};
  cache.keep_rows(n_ctx, keep);
  std::vector<Token> accepted = context_;
  const std::vector<Token> path = path_of(5);
  accepted.insert(accepted.end(), path.begin(), path.end());
  ASSERT_EQ(cache.size(), static_cast<int>(accepted.size()));
  KvCache fresh = model_->new_cache();
  decode_one_at_a_time(*model_, accepted, &fresh);
  for (int s = 0; s < cache.size(); ++s) EXPECT_TRUE(same_kv(cache, s, fresh, s)) << "slot " << s;
}

TEST_F(CachedTree, BadRowsThrowAndLeaveTheCacheAlone) {
  KvCache cache = model_->new_cache();
  prefill(cache);
  const int n_ctx = static_cast<int>(context_.size());
  {  // two level-1 nodes at slots n_ctx, n_ctx + 1
    Batch b;
    b.add_cached_tree_row(tokens_[0], n_ctx, -1, 0, false, n_ctx, {});
    b.add_cached_tree_row(tokens_[1], n_ctx, -1, 0, false, n_ctx, {});
    Logits out;
    KvCache* caches[] = {&cache};
    model_->forward(b, caches, out);
  }
  const int size = cache.size();
  struct Bad {
    const char* what;
    int32_t position, parent, visible;
    std::vector<int32_t> ancestors;
  };
  const std::vector<Bad> bad = {
      {"ancestor below the visible prefix", n_ctx + 1, -1, n_ctx, {n_ctx - 1}},
      {"ancestor past the cache", n_ctx + 1, -1, n_ctx, {size}},
      {"ancestors not increasing", n_ctx + 2, -1, n_ctx, {n_ctx + 1, n_ctx}},
      {"position ignores the ancestors", n_ctx, -1, n_ctx, {n_ctx}},
      {"visible prefix past the cache", size + 1, -1, size + 1, {}},
      {"batch parent with its own ancestors", n_ctx + 2, 0, n_ctx, {n_ctx}},
      {"visible prefix differs between rows", n_ctx, -1, n_ctx - 1, {}},
  };
  for (const Bad& c : bad) {
    Batch b;
    b.add_cached_tree_row(tokens_[2], n_ctx + 1, -1, 0, true, n_ctx, std::vector<int32_t>{n_ctx});
    b.add_cached_tree_row(tokens_[3], c.position, c.parent, 0, true, c.visible, c.ancestors);
    Logits out;
    KvCache* caches[] = {&cache};
    EXPECT_THROW(model_->forward(b, caches, out), Error) << c.what;
    EXPECT_EQ(cache.size(), size) << c.what;
  }
  Batch mismatched;
  mismatched.add_cached_tree_row(tokens_[2], n_ctx + 1, -1, 0, true, n_ctx, std::vector<int32_t>{n_ctx});
  mismatched.visible_prefix.push_back(n_ctx);
  Logits out;
  KvCache* caches[] = {&cache};
  EXPECT_THROW(model_->forward(mismatched, caches, out), Error);
  // A plain row added to a cached-tree batch sees the whole cache: position = cache size.
  Batch mixed;
  mixed.add_cached_tree_row(tokens_[2], n_ctx + 1, -1, 0, false, n_ctx, std::vector<int32_t>{n_ctx});
  mixed.add(tokens_[3], size, -1, 0, false);
  EXPECT_THROW(model_->forward(mixed, caches, out), Error) << "rows of one sequence with different prefixes";
  EXPECT_EQ(cache.size(), size);
}

}  // namespace
}  // namespace specdec::testing
