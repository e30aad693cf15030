// PromptLookupDrafter against a brute-force search on random sequences, rollback, and the
// lookup time on a 32k-token context (printed, not asserted).
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "common/testing.h"
#include "spec/spec_models.h"
#include "specdec/error.h"
#include "specdec/prompt_lookup.h"
#include "specdec/rng.h"
#include "specdec/timer.h"

namespace specdec {
namespace {

using testing::kGreedy;

// Most recent earlier occurrence of the last n tokens, n from lookup_max down to lookup_min.
LookupMatch brute_force_find(const std::vector<Token>& h, const PromptLookupConfig& c) {
  const int n_hist = static_cast<int>(h.size());
  for (int n = c.lookup_max; n >= c.lookup_min; --n) {
    if (n_hist < n + 1) continue;
    for (int end = n_hist - 2; end >= n - 1; --end) {
      bool same = true;
      for (int k = 0; k < n && same; ++k) same = h[static_cast<size_t>(end - k)] == h[static_cast<size_t>(n_hist - 1 - k)];
      if (!same) continue;
      LookupMatch m{n, end, n};
      while (m.match_length < c.max_match_length && end - m.match_length >= 0 &&
             h[static_cast<size_t>(end - m.match_length)] == h[static_cast<size_t>(n_hist - 1 - m.match_length)]) {
        ++m.match_length;
      }
      return m;
    }
  }
  return {};
}

// What the drafter should propose for a match: the tokens after it, periodically extended.
std::vector<Token> brute_force_proposal(const std::vector<Token>& h, const LookupMatch& m, int n_max) {
  std::vector<Token> seq = h;
  std::vector<Token> out;
  if (m.n == 0) return out;
  for (int j = 0; j < n_max; ++j) {
    Token t = seq[static_cast<size_t>(m.end + 1 + j)];
    seq.push_back(t);
    out.push_back(t);
  }
  return out;
}

TEST(PromptLookup, RejectsBadConfig) {
  EXPECT_THROW(PromptLookupDrafter(PromptLookupConfig{0, 3}), Error);
  EXPECT_THROW(PromptLookupDrafter(PromptLookupConfig{4, 3}), Error);
  EXPECT_THROW(PromptLookupDrafter(PromptLookupConfig{1, 65}), Error);
}

TEST(PromptLookup, ProposesWhatFollowedTheMostRecentOccurrence) {
  PromptLookupDrafter drafter(PromptLookupConfig{2, 3});
  // (1 2 3) occurs at 0..2 (followed by 4 5) and at 6..8 (followed by 7 8): the latter wins.
  const std::vector<Token> ctx{1, 2, 3, 4, 5, 0, 1, 2, 3, 7, 8, 9, 1, 2, 3};
  drafter.begin(ctx);
  Draft d = drafter.propose(ctx, 3, kGreedy);
  EXPECT_EQ(d.tokens, (std::vector<Token>{7, 8, 9}));
  EXPECT_EQ(d.parent, (std::vector<int32_t>{-1, 0, 1}));
  EXPECT_EQ(drafter.last_match().n, 3);
  EXPECT_EQ(drafter.last_match().end, 8);
  EXPECT_EQ(drafter.last_match().match_length, 3);
  ASSERT_EQ(drafter.last_confidence().size(), 3u);
  EXPECT_FLOAT_EQ(drafter.last_confidence()[0], 0.75f);
  // Near the end of the history the proposal continues periodically: 5 6 5 6 5 -> 6 5 6 5.
  const std::vector<Token> periodic{5, 6, 5, 6, 5};
  d = drafter.propose(periodic, 4, kGreedy);
  EXPECT_EQ(d.tokens, (std::vector<Token>{6, 5, 6, 5}));
  // No earlier occurrence of any suffix.
  const std::vector<Token> fresh{1, 2, 3, 4};
  EXPECT_TRUE(drafter.propose(fresh, 4, kGreedy).empty());
  EXPECT_TRUE(drafter.last_confidence().empty());
}

TEST(PromptLookup, MatchesBruteForceOnRandomSequences) {
  Rng rng(specdec::testing::test_seed("prompt lookup brute force"));
  const int n_trials = 30 / specdec::testing::sanitizer_slowdown() + 1;
  for (int trial = 0; trial < n_trials; ++trial) {
    PromptLookupConfig c;
    c.lookup_min = 1 + static_cast<int>(rng.below(3));
    c.lookup_max = c.lookup_min + static_cast<int>(rng.below(4));
    c.max_match_length = 1 + static_cast<int>(rng.below(12));
    const uint64_t n_vocab = 2 + rng.below(6);
    PromptLookupDrafter drafter(c);
    std::vector<Token> h;
    for (size_t i = 0; i < rng.below(5); ++i) h.push_back(static_cast<Token>(rng.below(n_vocab)));
    drafter.begin(h);
    for (int step = 0; step < 200; ++step) {
      // Mostly grow (by accept or by a longer context), sometimes roll back.
      const uint64_t action = rng.below(10);
      if (action == 0 && !h.empty()) {
        h.resize(rng.below(h.size() + 1));
        drafter.rollback(static_cast<int>(h.size()));
      } else if (action < 4) {
        Draft d;
        Verdict v;
        for (size_t i = 0, n = rng.below(4); i < n; ++i) {
          d.tokens.push_back(static_cast<Token>(rng.below(n_vocab)));
          d.parent.push_back(static_cast<int32_t>(i) - 1);
        }
        for (int i = 0, n = static_cast<int>(rng.below(static_cast<uint64_t>(d.size()) + 1)); i < n; ++i) {
          v.path.push_back(i);
          h.push_back(d.tokens[static_cast<size_t>(i)]);
        }
        v.next = static_cast<Token>(rng.below(n_vocab));
        h.push_back(v.next);
        drafter.accept(d, v);
      } else {
        h.push_back(static_cast<Token>(rng.below(n_vocab)));
      }
      const int n_max = static_cast<int>(rng.below(6));
      Draft d = drafter.propose(h, n_max, kGreedy);
      ASSERT_EQ(drafter.n_committed(), static_cast<int>(h.size()));
      LookupMatch want = brute_force_find(h, c);
      if (n_max == 0) want = {};
      const LookupMatch& got = drafter.last_match();
      ASSERT_EQ(got.n, want.n) << "trial " << trial << " step " << step;
      ASSERT_EQ(got.end, want.end) << "trial " << trial << " step " << step;
      ASSERT_EQ(got.match_length, want.match_length);
      ASSERT_EQ(d.tokens, brute_force_proposal(h, want, n_max));
    }
  }
}

TEST(PromptLookup, LookupTimeOn32kContext) {
  Rng rng(specdec::testing::test_seed("prompt lookup 32k"));
  const int n_ctx = 32768;
  std::vector<Token> ctx;  // (n_ctx) random text with repeated passages
  ctx.reserve(n_ctx);
  while (static_cast<int>(ctx.size()) < n_ctx) {
    if (ctx.size() > 512 && rng.below(4) == 0) {
      const size_t from = rng.below(ctx.size() - 256);
      for (size_t i = 0; i < 64 && static_cast<int>(ctx.size()) < n_ctx; ++i) ctx.push_back(ctx[from + i]);
    } else {
      ctx.push_back(static_cast<Token>(rng.below(32000)));
    }
  }
  PromptLookupDrafter drafter;
  double t0 = now_seconds();
  drafter.begin(std::span<const Token>(ctx).first(n_ctx - 1024));
  const double index_seconds = now_seconds() - t0;
  // Grow the remaining 1024 tokens one at a time, proposing 8 at each step.
  t0 = now_seconds();
  int n_found = 0;
  for (int len = n_ctx - 1024 + 1; len <= n_ctx; ++len) {
    Draft d = drafter.propose(std::span<const Token>(ctx).first(static_cast<size_t>(len)), 8, kGreedy);
    n_found += d.empty() ? 0 : 1;
  }
  const double per_lookup = (now_seconds() - t0) / 1024.0;
  std::printf("[measure] prompt lookup, 32k context: index %.2f ms (%d tokens), propose %.2f us per step "
              "(sync + lookup + 8 tokens; %d of 1024 steps found a match)\n",
              index_seconds * 1e3, n_ctx - 1024, per_lookup * 1e6, n_found);
  EXPECT_GT(n_found, 0);
}

}  // namespace
}  // namespace specdec
