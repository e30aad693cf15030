// HybridDrafter: the policy (lookup when long and confident, the other drafter otherwise) and
// state consistency of both members through accept and rollback.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "spec/spec_models.h"
#include "specdec/error.h"
#include "specdec/hybrid_drafter.h"
#include "specdec/ngram.h"
#include "specdec/prompt_lookup.h"

namespace specdec {
namespace {

using testing::kGreedy;

// Lookup in front of an order-2 n-gram drafter (a real, different drafter: its proposals
// differ from the lookup's, so the test sees which one answered).
std::unique_ptr<HybridDrafter> make_hybrid(HybridPolicy policy = {}) {
  return std::make_unique<HybridDrafter>(std::make_unique<PromptLookupDrafter>(PromptLookupConfig{2, 4}),
                                         std::make_unique<NgramDrafter>(NgramConfig{2, 2}), policy);
}

Verdict accept_all(const Draft& d, Token next) {
  Verdict v;
  for (int i = 0; i < d.size(); ++i) v.path.push_back(i);
  v.next = next;
  return v;
}

TEST(HybridDrafter, RequiresBothDrafters) {
  EXPECT_THROW(HybridDrafter(nullptr, std::make_unique<NgramDrafter>()), Error);
  EXPECT_THROW(HybridDrafter(std::make_unique<PromptLookupDrafter>(), nullptr), Error);
}

TEST(HybridDrafter, UsesTheLookupWhenLongAndConfidentElseTheOther) {
  auto hybrid = make_hybrid();
  EXPECT_EQ(hybrid->name(), "hybrid(lookup+ngram)");
  // A passage followed by its own beginning: the lookup matches 4+ tokens (confidence >= 0.8).
  std::vector<Token> ctx{10, 11, 12, 13, 14, 15, 16, 10, 11, 12, 13};
  hybrid->begin(ctx);
  Draft d = hybrid->propose(ctx, 3, kGreedy);
  EXPECT_TRUE(hybrid->last_from_lookup());
  EXPECT_EQ(d.tokens, (std::vector<Token>{14, 15, 16}));
  // Too short for the policy (min_length 2): the other drafter answers.
  d = hybrid->propose(ctx, 1, kGreedy);
  EXPECT_FALSE(hybrid->last_from_lookup());
  // Only a 2-token match (confidence 2/3 < 0.75): the n-gram drafter answers, with the most
  // frequent follower of 7 (8, twice) where the lookup would say 9 (the most recent).
  std::vector<Token> weak{6, 7, 8, 1, 5, 7, 8, 2, 6, 7, 9, 3, 6, 7};
  hybrid->begin(weak);
  d = hybrid->propose(weak, 1, kGreedy);
  EXPECT_FALSE(hybrid->last_from_lookup());
  d = hybrid->propose(weak, 2, kGreedy);
  EXPECT_FALSE(hybrid->last_from_lookup());
  EXPECT_EQ(d.tokens.front(), 8);
  EXPECT_EQ(hybrid->n_lookup_steps(), 1);
  EXPECT_EQ(hybrid->n_fallback_steps(), 3);
  // A permissive policy takes the lookup's 2-token match.
  auto permissive = make_hybrid(HybridPolicy{1, 0.5f});
  permissive->begin(weak);
  d = permissive->propose(weak, 2, kGreedy);
  EXPECT_TRUE(permissive->last_from_lookup());
  EXPECT_EQ(d.tokens, (std::vector<Token>{9, 3}));  // what followed the most recent "6 7"
}

TEST(HybridDrafter, BothMembersFollowTheCommittedSequence) {
  auto hybrid = make_hybrid();
  std::vector<Token> ctx{1, 2, 3, 4, 5, 6, 1, 2, 3, 4};
  hybrid->begin(ctx);
  for (int step = 0; step < 12; ++step) {
    Draft d = hybrid->propose(ctx, 3, kGreedy);
    // Accept the first token of the draft (if any) and add a token of our own.
    Verdict v;
    if (!d.empty()) {
      v.path = {0};
      ctx.push_back(d.tokens[0]);
    }
    v.next = static_cast<Token>(20 + step % 3);
    ctx.push_back(v.next);
    hybrid->accept(d, v);
    // Whatever answered, each member drafts exactly as a fresh drafter over ctx would.
    PromptLookupDrafter fresh_lookup(PromptLookupConfig{2, 4});
    NgramDrafter fresh_ngram(NgramConfig{2, 2});
    fresh_lookup.begin(ctx);
    fresh_ngram.begin(ctx);
    EXPECT_EQ(hybrid->lookup().propose(ctx, 4, kGreedy).tokens, fresh_lookup.propose(ctx, 4, kGreedy).tokens);
    EXPECT_EQ(hybrid->fallback().propose(ctx, 4, kGreedy).tokens, fresh_ngram.propose(ctx, 4, kGreedy).tokens);
  }
  EXPECT_GT(hybrid->n_lookup_steps(), 0);
  EXPECT_GT(hybrid->n_fallback_steps(), 0);
  // Rollback reaches both members.
  hybrid->rollback(7);
  EXPECT_EQ(static_cast<PromptLookupDrafter&>(hybrid->lookup()).n_committed(), 7);
  EXPECT_EQ(static_cast<NgramDrafter&>(hybrid->fallback()).n_committed(), 7);
  EXPECT_GE(hybrid->draft_seconds(), 0.0);
}

TEST(HybridDrafter, AcceptsAVerdictOnAFullDraft) {
  auto hybrid = make_hybrid();
  std::vector<Token> ctx{1, 2, 3, 4, 5, 1, 2, 3};
  hybrid->begin(ctx);
  Draft d = hybrid->propose(ctx, 2, kGreedy);
  ASSERT_TRUE(hybrid->last_from_lookup());
  hybrid->accept(d, accept_all(d, 9));
  EXPECT_EQ(static_cast<PromptLookupDrafter&>(hybrid->lookup()).n_committed(), 11);
}

}  // namespace
}  // namespace specdec
