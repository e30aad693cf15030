// One verification step, chain and one-node trees: the emitted token's empirical distribution
// against the EXACT target distribution p, by chi-square with a Bonferroni threshold across all
// cases; and the planted bugs, which the same statistic must reject.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "common/testing.h"
#include "sampling/chi_square.h"
#include "spec/synthetic.h"
#include "spec/tree_children.h"
#include "specdec/acceptance.h"
#include "specdec/error.h"
#include "specdec/rng.h"

namespace specdec {
namespace {

using testing::PairKind;

using testing::kFamilyAlpha;

struct Case {
  std::string name;
  std::vector<double> p, q;  // (n_vocab) dense
};

std::vector<Case> one_step_cases(Rng& rng) {
  std::vector<Case> cases;
  const PairKind kinds[] = {PairKind::Random,        PairKind::Equal,    PairKind::DisjointSupports,
                            PairKind::QOneHotInside, PairKind::QOneHotOutside, PairKind::ZerosInP,
                            PairKind::ZerosInQ,      PairKind::POneHot,  PairKind::Close};
  for (PairKind kind : kinds) {
    for (int rep = 0; rep < 3; ++rep) {
      const int n_vocab = 3 + static_cast<int>(rng.below(6));
      auto [p, q] = testing::random_pair(rng, kind, n_vocab);
      cases.push_back({std::string(testing::pair_kind_name(kind)) + " V=" + std::to_string(n_vocab), p, q});
    }
  }
  // A fixed, strongly skewed case every planted bug distorts a lot.
  cases.push_back({"fixed skewed", {0.6, 0.3, 0.1, 0.0}, {0.1, 0.2, 0.3, 0.4}});
  return cases;
}

// Runs `n_trials` single steps: node(s) drawn by the real child chooser from q, target rows
// p (root) and an arbitrary bonus row; returns the p-value of the first emitted token vs p.
testing::ChiSquareResult run_one_node(const Case& c, ChildRule rule, int n_children, int n_trials, Rng& rng,
                                      PlantedBug bug) {
  const int n_vocab = static_cast<int>(c.p.size());
  const SparseDist p = testing::to_sparse(c.p);
  const SparseDist q = testing::to_sparse(c.q);
  const SparseDist bonus = testing::to_sparse(std::vector<double>(static_cast<size_t>(n_vocab), 1.0 / n_vocab));
  const auto exact = testing::to_dense(p, n_vocab);
  std::vector<int64_t> counts(static_cast<size_t>(n_vocab), 0);
  AcceptOptions options;
  options.bug = bug;
  for (int t = 0; t < n_trials; ++t) {
    Draft draft;
    draft.rule = rule;
    for (Token x : choose_children(q, n_children, rule, rng)) {
      draft.add(x, -1, rule == ChildRule::Deterministic ? SparseDist{} : q);
    }
    std::vector<SparseDist> rows(static_cast<size_t>(draft.size()) + 1, bonus);
    rows[0] = p;
    const Verdict v = accept_sampling(draft, rows_from(rows), rng, options);
    const Token first = v.path.empty() ? v.next : draft.tokens[static_cast<size_t>(v.path[0])];
    ++counts[static_cast<size_t>(first)];
  }
  return testing::chi_square_test(counts, exact);
}

struct Family {
  double min_p_value = 1.0;
  std::string worst;
  int n_cases = 0;
  double threshold() const { return kFamilyAlpha / n_cases; }
};

Family run_family(ChildRule rule, int n_children, PlantedBug bug, uint64_t seed) {
  Rng rng(seed);
  const auto cases = one_step_cases(rng);
  // Fewer trials under sanitizers; a planted bug's detection is then not required (its power
  // needs every trial: testing::detection_power_checked).
  const int n_trials = bug == PlantedBug::None ? 20000 / testing::sanitizer_slowdown() : testing::planted_bug_trials(20000);
  Family family;
  family.n_cases = static_cast<int>(cases.size());
  for (const auto& c : cases) {
    const auto result = run_one_node(c, rule, n_children, n_trials, rng, bug);
    if (result.p_value < family.min_p_value) {
      family.min_p_value = result.p_value;
      family.worst = c.name + ": " + result.detail;
    }
  }
  return family;
}

// --- the exact algorithm passes ---------------------------------------------------------

TEST(AcceptOneStep, ChainMatchesTargetExactly) {
  const auto f = run_family(ChildRule::IndependentWithReplacement, 1, PlantedBug::None,
                            testing::test_seed("AcceptOneStep.ChainMatchesTargetExactly"));
  EXPECT_GT(f.min_p_value, f.threshold()) << f.worst;
}

TEST(AcceptOneStep, DeterministicDraftMatchesTarget) {
  const auto f = run_family(ChildRule::Deterministic, 1, PlantedBug::None,
                            testing::test_seed("AcceptOneStep.DeterministicDraftMatchesTarget"));
  EXPECT_GT(f.min_p_value, f.threshold()) << f.worst;
}

TEST(AcceptOneNodeTree, DeterministicChildrenMatchTarget) {
  const auto f = run_family(ChildRule::Deterministic, 3, PlantedBug::None,
                            testing::test_seed("AcceptOneNodeTree.DeterministicChildrenMatchTarget"));
  EXPECT_GT(f.min_p_value, f.threshold()) << f.worst;
}

TEST(AcceptOneNodeTree, IndependentChildrenWithDuplicatesMatchTarget) {
  const auto f = run_family(ChildRule::IndependentWithReplacement, 4, PlantedBug::None,
                            testing::test_seed("AcceptOneNodeTree.IndependentChildrenWithDuplicatesMatchTarget"));
  EXPECT_GT(f.min_p_value, f.threshold()) << f.worst;
}

TEST(AcceptOneNodeTree, ChildrenWithoutReplacementMatchTarget) {
  const auto f = run_family(ChildRule::WithoutReplacement, 3, PlantedBug::None,
                            testing::test_seed("AcceptOneNodeTree.ChildrenWithoutReplacementMatchTarget"));
  EXPECT_GT(f.min_p_value, f.threshold()) << f.worst;
}

TEST(AcceptOneNodeTree, DeterministicDuplicateChildrenMatchTarget) {
  // n-gram drafters can propose the same token on two branches.
  Rng rng(testing::test_seed("AcceptOneNodeTree.DeterministicDuplicateChildrenMatchTarget"));
  const int n_vocab = 5;
  const auto dense = testing::random_probs(rng, testing::full_mask(n_vocab));
  const SparseDist p = testing::to_sparse(dense);
  std::vector<int64_t> counts(n_vocab, 0);
  const int n_trials = 20000 / testing::sanitizer_slowdown();
  for (int t = 0; t < n_trials; ++t) {
    Draft draft;
    for (Token x : {2, 2, 0, 2}) draft.add(x, -1);
    std::vector<SparseDist> rows(5, p);
    const Verdict v = accept_sampling(draft, rows_from(rows), rng);
    ++counts[static_cast<size_t>(v.path.empty() ? v.next : draft.tokens[static_cast<size_t>(v.path[0])])];
    if (!v.path.empty()) {
      EXPECT_NE(v.path[0], 1) << "a duplicate child was followed";
    }
  }
  const auto r = testing::chi_square_test(counts, testing::to_dense(p, n_vocab));
  EXPECT_GT(r.p_value, kFamilyAlpha) << r.detail;
}

// --- planted bugs are rejected by the same statistics ----------------------------------

void expect_rejected(ChildRule rule, int n_children, PlantedBug bug, const char* name) {
  const auto f = run_family(rule, n_children, bug, testing::test_seed(name));
  if (!testing::detection_power_checked()) {  // a sanitizer build: the code paths only
    std::printf("[sanitizer] %s: detection not required in this build (the Release build requires it)\n", name);
    return;
  }
  EXPECT_LT(f.min_p_value, f.threshold()) << name << ": the planted bug was NOT detected; worst case " << f.worst;
}

TEST(AcceptPlantedBugs, NoResidualIsRejected) {
  expect_rejected(ChildRule::IndependentWithReplacement, 1, PlantedBug::NoResidual, "AcceptPlantedBugs.NoResidual");
}

TEST(AcceptPlantedBugs, UnnormalisedResidualIsRejected) {
  expect_rejected(ChildRule::IndependentWithReplacement, 1, PlantedBug::UnnormalisedResidual,
                  "AcceptPlantedBugs.UnnormalisedResidual");
}

TEST(AcceptPlantedBugs, TreeResidualUpdateRemovedIsRejected) {
  expect_rejected(ChildRule::IndependentWithReplacement, 3, PlantedBug::NoResidual,
                  "AcceptPlantedBugs.TreeResidualUpdateRemoved");
  expect_rejected(ChildRule::Deterministic, 3, PlantedBug::NoResidual,
                  "AcceptPlantedBugs.TreeDeterministicResidualRemoved");
}

TEST(AcceptPlantedBugs, WithoutReplacementQNotRenormalisedIsRejected) {
  expect_rejected(ChildRule::WithoutReplacement, 3, PlantedBug::NoQRenormalise,
                  "AcceptPlantedBugs.WithoutReplacementQNotRenormalised");
}

// --- greedy and unit behaviour ------------------------------------------------------------

TEST(AcceptGreedy, FollowsArgmaxChildAndStops) {
  Draft draft;
  const int a = draft.add(4, -1);
  draft.add(1, -1);
  const int c = draft.add(3, a);
  draft.add(2, c);
  // rows: root argmax 4 -> node a; after a argmax 3 -> node c; after c argmax 5 (no child).
  std::vector<SparseDist> rows(5, SparseDist::one_hot(0));
  rows[0] = SparseDist::one_hot(4);
  rows[static_cast<size_t>(a) + 1] = SparseDist::one_hot(3);
  rows[static_cast<size_t>(c) + 1] = SparseDist::one_hot(5);
  const Verdict v = accept_greedy(draft, rows_from(rows));
  EXPECT_EQ(v.path, (std::vector<int32_t>{a, c}));
  EXPECT_EQ(v.next, 5);
  // A non-one-hot row: argmax is the most probable id, ties to the lowest.
  SparseDist tie;
  tie.ids = {1, 4};
  tie.probs = {0.5f, 0.5f};
  rows[0] = tie;
  const Verdict w = accept_greedy(draft, rows_from(rows));
  EXPECT_EQ(w.path, (std::vector<int32_t>{1}));
}

TEST(AcceptSampling, AllAcceptedGivesBonusFromLeafRow) {
  Draft draft;
  draft.rule = ChildRule::IndependentWithReplacement;
  draft.add(1, -1, SparseDist::one_hot(1));
  draft.add(2, 0, SparseDist::one_hot(2));
  std::vector<SparseDist> rows = {SparseDist::one_hot(1), SparseDist::one_hot(2), SparseDist::one_hot(7)};
  Rng rng(1);
  const Verdict v = accept_sampling(draft, rows_from(rows), rng);
  EXPECT_EQ(v.path, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(v.next, 7);
}

TEST(AcceptSampling, RejectsMalformedDraftsAndLenience) {
  Draft draft;
  draft.tokens = {1, 2};
  draft.parent = {-1, 5};
  std::vector<SparseDist> rows(3, SparseDist::one_hot(1));
  Rng rng(1);
  EXPECT_THROW(accept_sampling(draft, rows_from(rows), rng), Error);
  Draft ok;
  ok.add(1, -1);
  AcceptOptions bad;
  bad.lenience = 1.5f;
  EXPECT_THROW(accept_sampling(ok, rows_from(rows), rng, bad), Error);
}

TEST(AcceptSampling, LenienceAcceptsMore) {
  // p(x) = 0.3, q(x) = 0.6: exact accepts half the time; lenience 0.5 always.
  Draft draft;
  draft.rule = ChildRule::IndependentWithReplacement;
  SparseDist q;
  q.ids = {0, 1};
  q.probs = {0.6f, 0.4f};
  SparseDist p;
  p.ids = {0, 1};
  p.probs = {0.3f, 0.7f};
  draft.add(0, -1, q);
  std::vector<SparseDist> rows = {p, p};
  Rng rng(3);
  int exact = 0, lenient = 0;
  AcceptOptions half;
  half.lenience = 0.5f;
  for (int i = 0; i < 2000; ++i) {
    exact += accept_sampling(draft, rows_from(rows), rng).n_accepted();
    lenient += accept_sampling(draft, rows_from(rows), rng, half).n_accepted();
  }
  EXPECT_EQ(lenient, 2000);
  EXPECT_NEAR(exact, 1000, 150);
}

TEST(ChooseChildren, RulesProduceTheDocumentedSets) {
  SparseDist q;
  q.ids = {0, 3, 5};
  q.probs = {0.2f, 0.5f, 0.3f};
  Rng rng(9);
  EXPECT_EQ(choose_children(q, 2, ChildRule::Deterministic, rng), (std::vector<Token>{3, 5}));
  EXPECT_EQ(choose_children(q, 9, ChildRule::Deterministic, rng).size(), 3u);
  for (int i = 0; i < 50; ++i) {
    auto wo = choose_children(q, 3, ChildRule::WithoutReplacement, rng);
    std::sort(wo.begin(), wo.end());
    EXPECT_EQ(wo, (std::vector<Token>{0, 3, 5}));
    EXPECT_EQ(choose_children(q, 5, ChildRule::IndependentWithReplacement, rng).size(), 5u);
  }
}

}  // namespace
}  // namespace specdec
