// The adaptive draft-length rule (spec/draft_length.h): K from acceptance and measured costs,
// the verify-cost curve between and past the measured row counts, the drift of positions no
// longer reached, and the decoder's exploring drafts after early rejections.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "common/testing.h"
#include "spec/draft_length.h"
#include "spec/spec_models.h"
#include "specdec/draft_model.h"
#include "specdec/speculative.h"
#include "specdec/timer.h"

namespace specdec {
namespace {

using testing::generate;
using testing::greedy_params;

TEST(DraftLength, ChoosesKFromAcceptanceAndCosts) {
  DraftLengthController high;
  for (int i = 0; i < 200; ++i) high.observe_acceptance(8, 8);
  high.observe_verify(1, 1.0);
  for (int m = 2; m <= 9; ++m) high.observe_verify(m, 1.0 + 0.01 * m);
  high.observe_draft(4, 0.04);  // c_draft = 0.01
  EXPECT_GT(high.alpha(1), 0.95);
  EXPECT_NEAR(high.c_draft(), 0.01, 1e-9);
  EXPECT_EQ(high.choose(0, 8), 8);

  DraftLengthController low;
  for (int i = 0; i < 200; ++i) low.observe_acceptance(4, 0);
  low.observe_verify(1, 1.0);
  low.observe_verify(5, 2.0);
  low.observe_draft(4, 1.0);  // c_draft = 0.25
  EXPECT_LT(low.alpha(1), 0.05);
  EXPECT_EQ(low.choose(0, 8), 0);
  EXPECT_EQ(low.choose(2, 8), 2);

  // Middle: alpha = 0.8, c = 0.1, linear verify cost 1 + 0.1 (M - 1): check against brute force.
  DraftLengthController mid;
  for (int i = 0; i < 1000; ++i) mid.observe_acceptance(1, i % 5 != 0 ? 1 : 0);
  for (int m = 1; m <= 12; ++m) mid.observe_verify(m, 1.0 + 0.1 * (m - 1));
  mid.observe_draft(1, 0.1);
  int best = 0;
  double best_rate = 0;
  for (int k = 0; k <= 10; ++k) {
    const double rate = mid.expected_tokens(k) / (k * 0.1 + 1.0 + 0.1 * k);
    if (rate > best_rate) {
      best_rate = rate;
      best = k;
    }
  }
  EXPECT_NEAR(mid.verify_cost(5), 1.4, 1e-9);
  EXPECT_EQ(mid.choose(0, 10), best);
  EXPECT_GT(best, 0);
  EXPECT_LT(best, 10);
}

TEST(DraftLength, DraftingCanPayOnlyWhenPerfectAcceptanceBeatsPlainDecoding) {
  // Verify cost 1 + 0.45 (M - 1), like a cache-resident model.
  DraftLengthController cheap, costly;
  for (auto* c : {&cheap, &costly}) {
    for (int m = 1; m <= 9; ++m) c->observe_verify(m, 1.0 + 0.45 * (m - 1));
  }
  cheap.observe_draft(1, 0.1);   // c_draft 0.1: K = 1 gives 2 / 1.55 > 1
  costly.observe_draft(1, 0.6);  // c_draft 0.6: (K + 1) / (0.6 K + 1 + 0.45 K) < 1 for every K
  EXPECT_TRUE(cheap.drafting_can_pay(8));
  EXPECT_FALSE(costly.drafting_can_pay(8));
  EXPECT_FALSE(cheap.drafting_can_pay(0)) << "no K allowed";
}

TEST(DraftLength, VerifyCostFromALineWhenOneRowIsUnmeasured) {
  DraftLengthController c;
  EXPECT_EQ(c.verify_cost(4), 1.0);  // nothing known
  c.observe_verify(3, 3.0);
  c.observe_verify(5, 5.0);
  EXPECT_NEAR(c.single_row_seconds(), 1.0, 1e-9);
  EXPECT_NEAR(c.verify_cost(5), 5.0, 1e-9);
}

TEST(DraftLength, PessimisticPriorDraftsOnlyOnEvidenceAndBacksOffFast) {
  // Costs like stories260K's: verify_cost(M) = 0.4 + 0.6 M, a free drafter.
  DraftLengthController c;
  c.set_prior(0.0);
  for (int m = 1; m <= 9; ++m) c.observe_verify(m, 0.4 + 0.6 * m);
  c.observe_draft(4, 0.0);
  EXPECT_EQ(c.choose(0, 8), 0) << "no evidence: no drafting";
  int n_to_start = 0;
  while (c.choose(0, 8) == 0 && n_to_start < 50) {
    c.observe_acceptance(4, 4);  // repetitive text: shadows fully matched
    ++n_to_start;
  }
  EXPECT_LE(n_to_start, 6) << "drafting must resume within a few matched shadows";
  for (int i = 0; i < 30; ++i) c.observe_acceptance(8, 8);
  const int k_high = c.choose(0, 8);
  EXPECT_GE(k_high, 4);
  int n_to_stop = 0;
  while (c.choose(0, 8) > 0 && n_to_stop < 50) {
    c.observe_acceptance(k_high, 0);  // the repetition ended
    ++n_to_stop;
  }
  EXPECT_LE(n_to_stop, 6) << "drafting must stop within a few rejected drafts";
  // With acceptance 0.2 (non-repetitive text) drafting never pays at these costs.
  DraftLengthController low;
  low.set_prior(0.0);
  for (int m = 1; m <= 9; ++m) low.observe_verify(m, 0.4 + 0.6 * m);
  for (int i = 0; i < 200; ++i) low.observe_acceptance(2, i % 5 == 0 ? 1 : 0);
  EXPECT_EQ(low.choose(0, 8), 0);
  // Timing outliers (a preempted forward) are clipped.
  DraftLengthController noisy;
  noisy.observe_verify(1, 1.0);
  noisy.observe_verify(1, 100.0);
  EXPECT_LE(noisy.single_row_seconds(), 2.0 + 1e-9);
}

TEST(DraftLength, VerifyCostBetweenAndPastTheMeasuredMultiRowCounts) {
  DraftLengthController c;
  c.observe_verify(1, 1.0);
  c.observe_verify(2, 1.8);
  EXPECT_NEAR(c.verify_cost(2), 1.8, 1e-9);
  // One multi-row count: flat past it (optimistic), not the line through M = 1 and 2 (4.2),
  // whose slope was the 1-row kernels' jump to a verify's.
  EXPECT_NEAR(c.verify_cost(5), 1.8, 1e-9);
  c.observe_verify(4, 2.4);
  EXPECT_NEAR(c.verify_cost(3), 2.1, 1e-9) << "between 2 and 4: the straight line between them";
  EXPECT_NEAR(c.verify_cost(6), 3.0, 1e-9) << "past 4: the slope through the multi-row counts (0.3)";
  // With M = 1 and 9 measured, M = 5 lies halfway.
  DraftLengthController far;
  far.observe_verify(1, 1.0);
  far.observe_verify(9, 1.8);
  EXPECT_NEAR(far.verify_cost(5), 1.4, 1e-9);
  EXPECT_NEAR(far.verify_cost(12), 1.8, 1e-9);
}

TEST(DraftLength, APositionNoLongerReachedDriftsBackToThePreviousOne) {
  // One rejection at position 2, then K = 1 with every token accepted: position 2 is never
  // tried again. Its estimate used to stay at half of alpha(1) for good, which kept K at 1.
  DraftLengthController c;
  c.observe_verify(1, 1.0);
  for (int m = 2; m <= 9; ++m) c.observe_verify(m, 1.0 + 0.05 * (m - 1));
  c.observe_acceptance(2, 1);
  EXPECT_LT(c.alpha(2), 0.6);
  for (int i = 0; i < 60; ++i) c.observe_acceptance(1, 1);
  EXPECT_GT(c.alpha(1), 0.95);
  EXPECT_GT(c.alpha(2), 0.9);
  EXPECT_GE(c.choose(0, 8), 4) << "cheap verifies and alpha ~1: long drafts";
  // A position still tried keeps its own rate.
  DraftLengthController half;
  for (int i = 0; i < 200; ++i) half.observe_acceptance(2, i % 2 == 0 ? 2 : 1);
  EXPECT_NEAR(half.alpha(2), 0.5, 0.05);
}

// Proposals of `inner` with every token shifted (so rejected) for the first n_bad proposals;
// accept() hands inner its own last proposal (nothing of it accepted then). No drafting time.
class FirstProposalsWrong : public testing::ClockFreeDrafter {
 public:
  FirstProposalsWrong(Drafter& inner, int n_bad, int n_vocab)
      : ClockFreeDrafter(inner), n_bad_(n_bad), n_vocab_(n_vocab) {}
  Draft propose(std::span<const Token> context, int n_max, const SamplingParams& sampling) override {
    last_ = ClockFreeDrafter::propose(context, n_max, sampling);
    Draft out = last_;
    if (n_proposals_++ < n_bad_) {
      for (Token& t : out.tokens) t = (t + 1) % n_vocab_;
    }
    return out;
  }
  void accept(const Draft& /*draft*/, const Verdict& verdict) override { ClockFreeDrafter::accept(last_, verdict); }

 private:
  int n_bad_, n_vocab_;
  int n_proposals_ = 0;
  Draft last_;
};

// Without shadow drafts (an expensive drafter), a draft model whose first proposals fail looks
// unprofitable once a verify's cost is measured, and only exploring drafts can show otherwise.
// They came every 48 plain steps (the demo pair: plain for 150 of 200 tokens at acceptance 0.96
// later, 0.8-0.9x plain decoding); now after 8, doubling while they keep failing. Here the
// warm-up's shadows and the first verified draft (an exploring one, after 8 plain steps) fail:
// the next exploring draft comes after 16 (after 48 with the old rule: the test then fails).
TEST(SpeculativeAdaptive, ExploresSoonAfterEarlyRejections) {
  const auto& trio = testing::tiny_trio();
  auto target = testing::load_single_threaded(trio.target);
  SpeculativeDecoder plain(*target, nullptr);
  DraftModelDrafter self_drafter(*target);  // the target drafting for itself: all accepted
  FirstProposalsWrong drafter(self_drafter, DraftLengthController::kDraftWarmup + 1, target->config().n_vocab);
  SpecConfig config;
  config.shadow = false;
  config.draft_max = 4;
  SpeculativeDecoder spec(*target, &drafter, config);
  const std::vector<Token> prompt{1, 61, 91};
  // A memory-bound model's cost curve, c(M) = 1.5 + 0.1 (M - 2), fed before any real verify
  // (60 samples per count: a later real one moves it by 2%, or by half when lower): drafting
  // pays at full acceptance but not at the acceptance the failed proposals leave, so only an
  // exploring draft can start it again, whatever this machine's own curve (a tiny model's
  // 2-row forward measured 1.3-2.1 1-row ones, where drafting barely pays).
  plain.begin(prompt, greedy_params());
  std::vector<double> t1;
  for (int i = 0; i < 15; ++i) {
    const double t0 = now_seconds();
    plain.step(1);
    t1.push_back(now_seconds() - t0);
  }
  std::sort(t1.begin(), t1.end());
  for (int i = 0; i < 60; ++i) {
    for (int m = 2; m <= config.draft_max + 1; ++m) spec.observe_verify_timing(m, t1[7] * (1.5 + 0.1 * (m - 2)));
  }
  spec.begin(prompt, greedy_params());
  std::vector<Token> out;
  int n_drafts = 0, plain_since_failed = 0, first_accepted_after = -1;
  while (out.size() < 100 && spec.remaining() > 0 && first_accepted_after < 0) {
    const auto emitted = spec.step(100 - static_cast<int>(out.size()));
    out.insert(out.end(), emitted.begin(), emitted.end());
    const StepInfo& s = spec.last_step();
    n_drafts += s.n_drafted > 0 ? 1 : 0;
    if (n_drafts >= 2 && s.n_accepted > 0) first_accepted_after = plain_since_failed;
    if (n_drafts >= 1 && s.n_drafted == 0) ++plain_since_failed;
  }
  EXPECT_EQ(out, generate(plain, prompt, greedy_params(), static_cast<int>(out.size())));
  std::printf("[measure] after a rejected draft: %d plain steps to an accepted one; estimated c(2) %.2f\n",
              first_accepted_after, spec.estimated_verify_cost(2));
  ASSERT_GE(first_accepted_after, 0) << "no draft was accepted after the first one failed";
  EXPECT_LE(first_accepted_after, 24) << "the exploring draft comes after 16 plain steps, not 48";
}

}  // namespace
}  // namespace specdec
