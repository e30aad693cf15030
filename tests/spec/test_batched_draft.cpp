// BatchedDraft (issue 7): several sequences' draft chains advanced level by level in shared
// draft forwards give, for every sequence, exactly the tokens, q (bit for bit) and draft cache
// of that sequence's drafter proposing alone, with different prompts, lengths, sampling
// params, seeds, p_min and K (0 included) per sequence; and the shared forwards are as few as
// the longest chain needs (one weight pass per level, not one per sequence and level).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/testing.h"
#include "spec/spec_models.h"
#include "specdec/batched_draft.h"
#include "specdec/draft_model.h"
#include "specdec/rng.h"

namespace specdec {
namespace {

using testing::cache_equals_fresh;

struct Sequence {
  std::vector<Token> context;     // committed tokens
  SamplingParams sampling;
  float p_min = 0.0f;
  PlantedBug bug = PlantedBug::None;
  std::unique_ptr<DraftModelDrafter> alone, batched;
};

::testing::AssertionResult same_draft(const Draft& a, const Draft& b) {
  if (a.tokens != b.tokens) return ::testing::AssertionFailure() << "tokens differ";
  if (a.parent != b.parent) return ::testing::AssertionFailure() << "parents differ";
  if (a.rule != b.rule) return ::testing::AssertionFailure() << "child rules differ";
  if (a.q.size() != b.q.size()) return ::testing::AssertionFailure() << "q counts differ";
  for (size_t i = 0; i < a.q.size(); ++i) {
    if (a.q[i].ids != b.q[i].ids) return ::testing::AssertionFailure() << "q[" << i << "] supports differ";
    if (a.q[i].probs.size() != b.q[i].probs.size() ||
        std::memcmp(a.q[i].probs.data(), b.q[i].probs.data(), a.q[i].probs.size() * sizeof(float)) != 0)
      return ::testing::AssertionFailure() << "q[" << i << "] probabilities differ in their bits";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_cache(const DraftModelDrafter& a, const DraftModelDrafter& b) {
  if (a.cache().size() != b.cache().size()) return ::testing::AssertionFailure() << "cache sizes differ";
  const std::vector<Token> ta(a.cached_tokens().begin(), a.cached_tokens().end());
  const std::vector<Token> tb(b.cached_tokens().begin(), b.cached_tokens().end());
  if (ta != tb) return ::testing::AssertionFailure() << "cached tokens differ";
  for (int s = 0; s < a.cache().size(); ++s)
    if (!a.cache().same_slot(s, b.cache(), s)) return ::testing::AssertionFailure() << "K/V differ at slot " << s;
  return ::testing::AssertionSuccess();
}

SamplingParams params(float temperature, int top_k, float top_p, float min_p, uint64_t seed) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = seed;
  return p;
}

// Runs `rounds` of: batched proposals vs lone proposals (compared), then the same random
// verdict (accepted prefix + next token) or rollback on both drafters (caches compared).
// expect_minimal_forwards: one shared forward per level (catch-up within max_rows).
void run_rounds(Transformer& model, std::vector<Sequence>& seqs, const std::vector<std::vector<int>>& ks, Rng& rng,
                bool expect_minimal_forwards, int max_rows = 256) {
  const int n_vocab = model.config().n_vocab;
  BatchedDraft batched(model, max_rows);
  std::vector<int64_t> own_forwards;  // (sequences) the batched drafters' own forwards (begin's prefill)
  for (const Sequence& s : seqs) own_forwards.push_back(s.batched->forwards());
  for (size_t round = 0; round < ks.size(); ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::vector<BatchedDraft::Job> jobs;
    for (size_t i = 0; i < seqs.size(); ++i) {
      ASSERT_EQ(batched.batchable(seqs[i].batched.get()), seqs[i].batched.get());
      jobs.push_back({seqs[i].batched.get(), seqs[i].context, ks[round][i], &seqs[i].sampling});
    }
    const int64_t forwards_before = batched.forwards();
    const std::vector<Draft> together = batched.propose(jobs);
    ASSERT_EQ(together.size(), seqs.size());
    int64_t longest_alone = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      SCOPED_TRACE("sequence " + std::to_string(i));
      Sequence& s = seqs[i];
      const int64_t before = s.alone->forwards();
      const Draft alone = s.alone->propose(s.context, ks[round][i], s.sampling);
      longest_alone = std::max(longest_alone, s.alone->forwards() - before);
      EXPECT_TRUE(same_draft(alone, together[i]));
      EXPECT_LE(together[i].size(), ks[round][i]);
      EXPECT_TRUE(same_cache(*s.alone, *s.batched)) << "after the proposal";
      EXPECT_EQ(s.batched->forwards(), own_forwards[i]) << "a batched drafter forwards nothing alone";

      // The same verdict for both: a random accepted prefix, then a random next token.
      Verdict verdict;
      const int n_accept = alone.empty() ? 0 : static_cast<int>(rng.next_u64() % static_cast<uint64_t>(alone.size() + 1));
      for (int a = 0; a < n_accept; ++a) verdict.path.push_back(a);
      verdict.next = static_cast<Token>(3 + rng.next_u64() % static_cast<uint64_t>(n_vocab - 3));
      if (!alone.empty()) {
        s.alone->accept(alone, verdict);
        s.batched->accept(together[i], verdict);
      }
      s.context.insert(s.context.end(), alone.tokens.begin(), alone.tokens.begin() + n_accept);
      s.context.push_back(verdict.next);
      if (rng.next_u64() % 5 == 0 && s.context.size() > 4) {  // a stop string cut the sequence back
        const int n = static_cast<int>(s.context.size()) - 2;
        s.context.resize(static_cast<size_t>(n));
        s.alone->rollback(n);
        s.batched->rollback(n);
      }
      EXPECT_TRUE(same_cache(*s.alone, *s.batched)) << "after the verdict";
      std::vector<Token> cached(s.batched->cached_tokens().begin(), s.batched->cached_tokens().end());
      EXPECT_TRUE(cache_equals_fresh(model, s.batched->cache(), cached));
    }
    // Every level is one shared forward: as many as the longest lone chain needed.
    if (expect_minimal_forwards) {
      EXPECT_EQ(batched.forwards() - forwards_before, longest_alone);
    }
  }
}

TEST(BatchedDraft, EachSequenceGetsExactlyItsLoneDraft) {
  const uint64_t seed = testing::test_seed("BatchedDraft");
  Rng rng(seed);
  const auto& trio = testing::tiny_trio();
  auto model = testing::load_single_threaded(trio.noisy);
  const int n_vocab = model->config().n_vocab;

  std::vector<Sequence> seqs(6);
  seqs[0].sampling = testing::greedy_params();
  seqs[1].sampling = testing::t1_params(seed + 1);
  seqs[2].sampling = params(0.7f, 20, 0.9f, 0.05f, seed + 2);
  seqs[2].sampling.repeat_penalty = 1.3f;
  seqs[2].sampling.presence_penalty = 0.5f;
  seqs[2].sampling.logit_bias = {{5, 2.0f}, {7, -1.0f}};
  seqs[3].sampling = params(1.3f, 0, 1.0f, 0.0f, seed + 3);
  seqs[3].p_min = 0.05f;
  seqs[4].sampling = testing::t1_params(seed + 4);
  seqs[4].bug = PlantedBug::QRecomputedAfter;  // the late-q path steps the same way batched
  seqs[5].sampling = testing::greedy_params();
  seqs[5].p_min = 0.3f;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence& s = seqs[i];
    const int len = 2 + static_cast<int>(rng.next_u64() % 30);
    for (int t = 0; t < len; ++t) s.context.push_back(static_cast<Token>(3 + rng.next_u64() % static_cast<uint64_t>(n_vocab - 3)));
    DraftModelOptions options;
    options.bug = s.bug;
    if (i == 1) options.n_vocab_target = n_vocab - 40;  // a padded draft vocabulary: masked ids
    s.alone = std::make_unique<DraftModelDrafter>(*model, options);
    s.batched = std::make_unique<DraftModelDrafter>(*model, options);
    s.alone->set_p_min(s.p_min);
    s.batched->set_p_min(s.p_min);
    s.alone->begin(s.context);
    s.batched->begin(s.context);
  }
  std::vector<std::vector<int>> ks;  // (rounds, sequences) K per sequence and round
  const int rounds = std::max(3, 8 / testing::sanitizer_slowdown());
  for (int r = 0; r < rounds; ++r) {
    std::vector<int> k;
    for (size_t i = 0; i < seqs.size(); ++i) k.push_back(static_cast<int>(rng.next_u64() % 9));  // 0..8
    ks.push_back(k);
  }
  ks[0] = {0, 1, 3, 5, 8, 4};  // K = 0 next to drafting sequences
  run_rounds(*model, seqs, ks, rng, /*expect_minimal_forwards=*/true);
}

TEST(BatchedDraft, LongCatchUpIsSpreadOverForwardsAndStaysExact) {
  // A sequence whose draft cache lags far behind (begin() on a 2-token prefix of a 100-token
  // context) catches up in chunks of at most max_rows rows per shared forward.
  const uint64_t seed = testing::test_seed("BatchedDraft catch-up");
  Rng rng(seed);
  const auto& trio = testing::tiny_trio();
  auto model = testing::load_single_threaded(trio.noisy);
  for (int max_rows : {256, 8}) {
    SCOPED_TRACE("max_rows " + std::to_string(max_rows));
    std::vector<Sequence> seqs(2);
    for (size_t i = 0; i < seqs.size(); ++i) {
      Sequence& s = seqs[i];
      s.sampling = testing::t1_params(seed + i);
      for (int t = 0; t < (i == 0 ? 100 : 3); ++t) s.context.push_back(static_cast<Token>(3 + (t * 7 + static_cast<int>(i)) % 250));
      const std::vector<Token> head(s.context.begin(), s.context.begin() + 2);
      s.alone = std::make_unique<DraftModelDrafter>(*model);
      s.batched = std::make_unique<DraftModelDrafter>(*model);
      s.alone->begin(head);
      s.batched->begin(head);
    }
    // 8 rows per forward: the 98-row catch-up takes 13 shared forwards (alone: one of 98 rows).
    run_rounds(*model, seqs, {{4, 4}, {2, 6}}, rng, /*expect_minimal_forwards=*/max_rows == 256, max_rows);
  }
}

TEST(BatchedDraft, OnlyChainDraftersOfTheSameModelAreBatchable) {
  const auto& trio = testing::tiny_trio();
  auto model = testing::load_single_threaded(trio.noisy);
  auto other = testing::load_single_threaded(trio.unrelated);
  BatchedDraft batched(*model);
  DraftModelDrafter chain(*model);
  DraftModelOptions tree_options;
  tree_options.tree_nodes = 4;
  DraftModelDrafter tree(*model, tree_options);
  DraftModelDrafter foreign(*other);
  EXPECT_EQ(batched.batchable(&chain), &chain);
  EXPECT_EQ(batched.batchable(&tree), nullptr);
  EXPECT_EQ(batched.batchable(&foreign), nullptr);
  EXPECT_EQ(batched.batchable(nullptr), nullptr);
  // No jobs: nothing forwarded.
  EXPECT_TRUE(batched.propose({}).empty());
  EXPECT_EQ(batched.forwards(), 0);
}

}  // namespace
}  // namespace specdec
