// NgramTable and NgramDrafter: tables, longest-order-first with fallback, chaining, confidence,
// window eviction (against brute-force counting), rollback, learning from verdicts.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "common/testing.h"
#include "spec/spec_models.h"
#include "specdec/error.h"
#include "specdec/ngram.h"
#include "specdec/rng.h"

namespace specdec {
namespace {

using testing::kGreedy;

// The prediction NgramDrafter must make, by counting n-grams in the window directly.
NgramPrediction brute_force_predict(const std::vector<Token>& history, const NgramConfig& config,
                                    const std::vector<Token>& tail) {
  const int n_hist = static_cast<int>(history.size());
  for (int order = config.max_order; order >= config.min_order; --order) {
    const int n_ctx = order - 1;
    if (static_cast<int>(tail.size()) < n_ctx) continue;
    std::map<Token, std::pair<uint32_t, int>> seen;  // token -> (count, last end position)
    uint32_t total = 0;
    for (int end = std::max(0, n_hist - config.window); end < n_hist; ++end) {
      if (end < n_ctx) continue;
      bool same = true;
      for (int k = 0; k < n_ctx; ++k) {
        same = same && history[static_cast<size_t>(end - n_ctx + k)] == tail[tail.size() - static_cast<size_t>(n_ctx - k)];
      }
      if (!same) continue;
      auto& s = seen[history[static_cast<size_t>(end)]];
      ++s.first;
      s.second = end;
      ++total;
    }
    if (total == 0 || total < config.min_count) continue;
    NgramPrediction best;
    int best_last = -1;
    for (const auto& [token, s] : seen) {  // ascending ids: strict comparisons keep the lowest id
      if (s.first > best.count || (s.first == best.count && s.second > best_last)) {
        best.token = token;
        best.count = s.first;
        best_last = s.second;
      }
    }
    best.total = total;
    best.order = order;
    return best;
  }
  return {};
}

TEST(NgramTable, CountsTiesAndRemoval) {
  NgramTable table;
  const uint64_t key = 42;
  EXPECT_EQ(table.best(key).token, -1);
  table.add(key, 7, 1, 0);
  table.add(key, 5, 1, 1);
  // Tie on count: the more recent (5 at position 1) wins.
  EXPECT_EQ(table.best(key).token, 5);
  table.add(key, 7, 1, 2);
  NgramPrediction p = table.best(key);
  EXPECT_EQ(p.token, 7);
  EXPECT_EQ(p.count, 2u);
  EXPECT_EQ(p.total, 3u);
  EXPECT_FLOAT_EQ(p.confidence(), 2.0f / 4.0f);
  table.remove(key, 7);
  table.remove(key, 7);
  EXPECT_EQ(table.best(key).token, 5);
  table.remove(key, 5);
  EXPECT_EQ(table.size(), 0u);
  EXPECT_THROW(table.remove(key, 5), InternalError);
}

TEST(NgramTable, MaxNextReplacesTheRarest) {
  NgramTable table;
  table.add(1, 10, 3, 0, 2);
  table.add(1, 11, 1, 0, 2);
  table.add(1, 12, 1, 0, 2);  // full: replaces the rarest, 11
  const auto& entry = table.entries().at(1);
  EXPECT_EQ(entry.next.size(), 2u);
  EXPECT_EQ(entry.total, 4u);
  EXPECT_EQ(table.best(1).token, 10);
}

TEST(NgramKey, DependsOnTokensOrderAndLength) {
  const std::vector<Token> a{1, 2, 3}, b{3, 2, 1}, c{2, 3};
  EXPECT_NE(ngram_key(a), ngram_key(b));
  EXPECT_NE(ngram_key(std::span<const Token>(a).last(2)), ngram_key(std::span<const Token>(a).first(2)));
  EXPECT_EQ(ngram_key(std::span<const Token>(a).last(2)), ngram_key(c));
  EXPECT_NE(ngram_key(std::span<const Token>()), ngram_key(std::span<const Token>(c).first(1)));
}

TEST(NgramDrafter, RejectsBadConfig) {
  EXPECT_THROW(NgramDrafter(NgramConfig{1, 4}), Error);
  EXPECT_THROW(NgramDrafter(NgramConfig{4, 3}), Error);
  EXPECT_THROW(NgramDrafter(NgramConfig{2, 17}), Error);
  NgramConfig c;
  c.window = 0;
  EXPECT_THROW(NgramDrafter{c}, Error);
}

TEST(NgramDrafter, LongestOrderFirstThenFallback) {
  // After (1 2 3) came 10 once; after (2 3) came 11 twice, 10 once.
  const std::vector<Token> prompt{1, 2, 3, 10, 5, 2, 3, 11, 6, 2, 3, 11, 1, 2, 3};
  NgramDrafter four(NgramConfig{2, 4});
  four.begin(prompt);
  NgramPrediction p = four.predict(std::vector<Token>{1, 2, 3});
  EXPECT_EQ(p.token, 10);
  EXPECT_EQ(p.order, 4);
  NgramDrafter three(NgramConfig{2, 3});
  three.begin(prompt);
  p = three.predict(std::vector<Token>{1, 2, 3});
  EXPECT_EQ(p.token, 11);
  EXPECT_EQ(p.order, 3);
  EXPECT_EQ(p.count, 2u);
  EXPECT_EQ(p.total, 3u);
  // (9 9 3) and (9 3) never seen: falls back to order 2, context (3).
  p = four.predict(std::vector<Token>{9, 9, 3});
  EXPECT_EQ(p.order, 2);
  EXPECT_EQ(p.token, 11);
  // Nothing known about 99.
  EXPECT_EQ(four.predict(std::vector<Token>{99}).token, -1);
}

TEST(NgramDrafter, ChainsItsOwnPredictions) {
  NgramDrafter drafter;
  const std::vector<Token> prompt{4, 5, 6, 7, 4, 5, 6, 7, 4, 5};
  drafter.begin(prompt);
  Draft d = drafter.propose(prompt, 7, kGreedy);
  EXPECT_EQ(d.tokens, (std::vector<Token>{6, 7, 4, 5, 6, 7, 4}));
  EXPECT_EQ(d.parent, (std::vector<int32_t>{-1, 0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(d.q.empty());
  EXPECT_EQ(d.rule, ChildRule::Deterministic);
  ASSERT_EQ(drafter.last_confidence().size(), 7u);
  EXPECT_FLOAT_EQ(drafter.last_confidence()[0], 1.0f / 2.0f);  // order 4: (7 4 5) -> 6 seen once
  EXPECT_TRUE(drafter.propose(prompt, 0, kGreedy).empty());
  EXPECT_GE(drafter.draft_seconds(), 0.0);
}

TEST(NgramDrafter, StopsWhenConfidenceIsLow) {
  NgramConfig c;
  c.min_order = c.max_order = 2;
  c.min_confidence = 0.6f;
  NgramDrafter drafter(c);
  // (2) -> 3 three times: 3/4; (3) -> 8, 9, 8: 2/4 < 0.6 stops the chain.
  const std::vector<Token> prompt{1, 2, 3, 8, 1, 2, 3, 9, 1, 2, 3, 8, 1, 2};
  Draft d = drafter.propose(prompt, 5, kGreedy);
  EXPECT_EQ(d.tokens, (std::vector<Token>{3}));
}

TEST(NgramDrafter, LearnsFromVerdictsAndSyncsWithContext) {
  NgramDrafter drafter;
  drafter.begin(std::vector<Token>{1, 2, 3});
  Draft d;
  d.tokens = {20, 21, 22};
  d.parent = {-1, 0, 1};
  Verdict v;
  v.path = {0, 1};
  v.next = 30;
  drafter.accept(d, v);
  EXPECT_EQ(drafter.n_committed(), 6);  // 1 2 3 20 21 30
  EXPECT_EQ(drafter.predict(std::vector<Token>{3, 20}).token, 21);
  EXPECT_EQ(drafter.predict(std::vector<Token>{21}).token, 30);
  // propose() with a context that diverged from what the drafter saw resyncs.
  const std::vector<Token> context{1, 2, 3, 20, 40, 41};
  drafter.propose(context, 1, kGreedy);
  EXPECT_EQ(drafter.n_committed(), 6);
  EXPECT_EQ(drafter.predict(std::vector<Token>{21}).token, -1);
  EXPECT_EQ(drafter.predict(std::vector<Token>{20}).token, 40);
}

TEST(NgramDrafter, WindowEvictsAndMatchesBruteForce) {
  Rng rng(specdec::testing::test_seed("ngram window"));
  for (int trial = 0; trial < 20; ++trial) {
    NgramConfig c;
    c.min_order = 2 + static_cast<int>(rng.below(2));
    c.max_order = c.min_order + static_cast<int>(rng.below(3));
    c.window = 1 + static_cast<int>(rng.below(40));
    c.min_count = 1 + static_cast<uint32_t>(rng.below(2));
    const int n_vocab = 2 + static_cast<int>(rng.below(5));
    NgramDrafter drafter(c);
    std::vector<Token> history;
    drafter.begin(history);
    for (int step = 0; step < 150; ++step) {
      history.push_back(static_cast<Token>(rng.below(static_cast<uint64_t>(n_vocab))));
      Draft one;
      one.tokens = {history.back()};
      one.parent = {-1};
      Verdict v;
      v.path = {0};
      drafter.accept(one, v);
      for (int order = c.min_order; order <= c.max_order; ++order) {
        ASSERT_LE(drafter.table_size(order), static_cast<size_t>(c.window));
      }
      std::vector<Token> tail(history.end() - std::min<ptrdiff_t>(3, static_cast<ptrdiff_t>(history.size())), history.end());
      for (int k = 0; k < 3 && !tail.empty(); ++k) {
        NgramPrediction want = brute_force_predict(history, c, tail);
        NgramPrediction got = drafter.predict(tail);
        ASSERT_EQ(got.token, want.token) << "trial " << trial << " step " << step;
        ASSERT_EQ(got.count, want.count);
        ASSERT_EQ(got.total, want.total);
        ASSERT_EQ(got.order, want.order);
        tail[rng.below(tail.size())] = static_cast<Token>(rng.below(static_cast<uint64_t>(n_vocab)));
      }
    }
  }
}

// Contexts followed by many distinct tokens (more than the table's inline candidates, so the
// overflow chains fill and drain as the window slides) still predict exactly.
TEST(NgramDrafter, ManyDistinctNextTokensStayExactAcrossTheWindow) {
  Rng rng(specdec::testing::test_seed("ngram many next tokens"));
  NgramConfig c;
  c.min_order = 2;
  c.max_order = 3;
  c.window = 48;
  NgramDrafter drafter(c);
  std::vector<Token> history{0};
  drafter.begin(history);
  for (int step = 0; step < 400; ++step) {
    // Token 0 every other position: context (0) sees up to 11 distinct next tokens.
    history.push_back(step % 2 ? Token{0} : static_cast<Token>(1 + rng.below(11)));
    drafter.propose(history, 1, kGreedy);  // syncs the new token
    ASSERT_LE(drafter.table_size(2), static_cast<size_t>(c.window));
    for (Token last = 0; last < 12; ++last) {
      const std::vector<Token> tail{history.back(), last};
      const NgramPrediction want = brute_force_predict(history, c, tail);
      const NgramPrediction got = drafter.predict(tail);
      ASSERT_EQ(got.token, want.token) << "step " << step << " last " << last;
      ASSERT_EQ(got.count, want.count);
      ASSERT_EQ(got.total, want.total);
      ASSERT_EQ(got.order, want.order);
    }
  }
}

TEST(NgramDrafter, EvictedNgramsAreForgotten) {
  NgramConfig c;
  c.window = 8;
  NgramDrafter drafter(c);
  std::vector<Token> seq{7, 8};
  drafter.begin(seq);
  EXPECT_EQ(drafter.predict(std::vector<Token>{7}).token, 8);
  for (Token t = 100; t < 108; ++t) seq.push_back(t);
  drafter.propose(seq, 1, kGreedy);  // syncs the 8 new tokens
  EXPECT_EQ(drafter.predict(std::vector<Token>{7}).token, -1);
  EXPECT_EQ(drafter.predict(std::vector<Token>{106}).token, 107);
}

TEST(NgramDrafter, RollbackEqualsAFreshDrafter) {
  Rng rng(specdec::testing::test_seed("ngram rollback"));
  NgramConfig c;
  c.window = 16;
  std::vector<Token> seq;
  for (int i = 0; i < 60; ++i) seq.push_back(static_cast<Token>(rng.below(4)));
  NgramDrafter drafter(c);
  drafter.begin(seq);
  for (int cut : {59, 40, 17, 3, 0}) {
    drafter.rollback(cut);
    std::vector<Token> kept(seq.begin(), seq.begin() + cut);
    NgramDrafter fresh(c);
    fresh.begin(kept);
    EXPECT_EQ(drafter.n_committed(), cut);
    for (Token a = 0; a < 4; ++a) {
      for (Token b = 0; b < 4; ++b) {
        std::vector<Token> tail{a, b};
        EXPECT_EQ(drafter.predict(tail).token, fresh.predict(tail).token);
        EXPECT_EQ(drafter.predict(tail).total, fresh.predict(tail).total);
      }
    }
    EXPECT_EQ(drafter.propose(kept, 6, kGreedy).tokens, fresh.propose(kept, 6, kGreedy).tokens);
  }
}

}  // namespace
}  // namespace specdec
