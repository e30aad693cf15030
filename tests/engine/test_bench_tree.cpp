// The token-tree SIMULATION of `specdec bench` (issue 9): best-first trees against hand-computed
// values and a Monte-Carlo walk of the positional acceptance model, the chain-vs-tree
// arithmetic, bad profiles, and a whole run with a tree drafter compared with its chain.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/testing.h"
#include "common/tiny_model.h"
#include "specdec/bench.h"
#include "specdec/error.h"
#include "specdec/rng.h"
#include "specdec/make_model.h"

namespace specdec {
namespace {

TEST(BenchTree, BestFirstTreeTakesTheLargestPathValues) {
  const std::vector<double> profile = {0.6, 0.2, 0.1};
  // Values offered: 0.6 (root's first), then 0.36 (its first child) over 0.2 (root's second),
  // then 0.216 over 0.2, then 0.2 (root's second child) over 0.1296.
  const SimTree t = best_first_tree(profile, 4);
  EXPECT_EQ(t.parent, (std::vector<int>{-1, 0, 1, -1}));
  EXPECT_EQ(t.rank, (std::vector<int>{0, 0, 0, 1}));
  EXPECT_NEAR(t.expected_tokens(), 1 + 0.6 + 0.36 + 0.216 + 0.2, 1e-12);
  EXPECT_EQ(t.depth, 3);
  EXPECT_EQ(t.root_children, 2);
  // A chain is the width-1 profile: the geometric sum of the chain model.
  for (int n : {0, 1, 5, 16}) EXPECT_NEAR(best_first_tree({0.7}, n).expected_tokens(), expected_tokens(0.7, n), 1e-12);
  // More nodes never hurt, and the tree never loses to the chain of its first-rank acceptance.
  double last = 1.0;
  for (int n = 1; n <= 32; ++n) {
    const double e = best_first_tree(profile, n).expected_tokens();
    EXPECT_GE(e, last);
    EXPECT_GE(e + 1e-12, expected_tokens(0.6, n));
    last = e;
  }
  EXPECT_GT(best_first_tree(profile, 16).expected_tokens(), expected_tokens(0.6, 16) + 0.1);
  EXPECT_THROW(best_first_tree({0.7, 0.4}, 3), Error);  // sums above 1
  EXPECT_THROW(best_first_tree({1.2}, 3), Error);
  EXPECT_THROW(best_first_tree({}, 3), Error);
  EXPECT_THROW(best_first_tree({0.5}, -1), Error);
}

// Accepted tokens + 1 of one target pass: from the root, child r is the accepted one with
// probability profile[r]; the walk continues while that child is in the tree.
int walk(const SimTree& t, const std::vector<double>& profile, Rng& rng) {
  int node = -1, tokens = 1;
  for (;;) {
    const double u = rng.uniform();
    int r = 0;
    double cum = profile[0];
    while (u >= cum && r + 1 < static_cast<int>(profile.size())) cum += profile[static_cast<size_t>(++r)];
    if (u >= cum) return tokens;  // no child accepted
    int next = -1;
    for (size_t i = 0; i < t.parent.size(); ++i)
      if (t.parent[i] == node && t.rank[i] == r) next = static_cast<int>(i);
    if (next < 0) return tokens;
    node = next;
    ++tokens;
  }
}

TEST(BenchTree, ExpectedTokensMatchAMonteCarloWalkOfTheModel) {
  const std::vector<double> profile = {0.55, 0.25, 0.1};
  Rng rng(testing::test_seed("BenchTree.MonteCarlo"));
  const int n_trials = 200000 / testing::sanitizer_slowdown();
  for (int n : {3, 8, 16}) {
    const SimTree t = best_first_tree(profile, n);
    double sum = 0, sum_sq = 0;
    for (int i = 0; i < n_trials; ++i) {
      const double x = walk(t, profile, rng);
      sum += x;
      sum_sq += x * x;
    }
    const double mean = sum / n_trials;
    const double sd = std::sqrt(std::max(0.0, sum_sq / n_trials - mean * mean) / n_trials);
    EXPECT_NEAR(mean, t.expected_tokens(), 5 * sd + 1e-9) << n << " nodes";
  }
}

TEST(BenchTree, ChainVersusTreeUsesTheMeasuredCost) {
  CostCurve curve;
  for (int m = 1; m <= 17; ++m) curve.cost.push_back(1.0 + 0.05 * (m - 1));
  const std::vector<double> profile = {0.6, 0.2, 0.1};
  const TreeSimulation sim = simulate_tree_vs_chain(profile, {8, 16}, 0.05, "given", curve, 10.0);
  ASSERT_EQ(sim.points.size(), 2u);
  for (const TreeSimPoint& p : sim.points) {
    const SimTree tree = best_first_tree(profile, p.nodes);
    EXPECT_DOUBLE_EQ(p.chain_tokens, expected_tokens(0.6, p.nodes));
    EXPECT_DOUBLE_EQ(p.tree_tokens, tree.expected_tokens());
    EXPECT_DOUBLE_EQ(p.verify_cost, 1.0 + 0.05 * p.nodes);
    EXPECT_DOUBLE_EQ(p.chain_speedup, p.chain_tokens / (p.nodes * 0.05 + p.verify_cost));
    EXPECT_DOUBLE_EQ(p.tree_speedup, p.tree_tokens / (tree.depth * 0.05 + p.verify_cost));
    EXPECT_DOUBLE_EQ(p.tree_tps, 10.0 * p.tree_speedup);
    EXPECT_GT(p.tree_tokens, p.chain_tokens);
    EXPECT_LT(p.tree_depth, p.nodes);
  }
  EXPECT_THROW(simulate_tree_vs_chain(profile, {17}, 0.0, "given", curve, 10.0), Error);  // needs c(18)
  EXPECT_THROW(simulate_tree_vs_chain({0.9, 0.2}, {4}, 0.0, "given", curve, 10.0), Error);
  EXPECT_THROW(simulate_tree_vs_chain(profile, {4}, -1.0, "given", curve, 10.0), Error);
}

TEST(BenchTree, RunReportsTreeSimulationAndTheChainAtTheSameBudget) {
  testing::TinyModelSpec spec;
  spec.weight_scale = 3.0f;
  const std::string target = testing::make_random_llama("bench-tree-target.gguf", spec);
  const std::string draft = testing::temp_dir() + "/bench-tree-draft.gguf";
  make_noisy_copy(target, draft, 0.05f, 13);
  BenchOptions o;
  o.engine.model_path = target;
  o.engine.draft_path = draft;
  o.engine.method = SpecMethod::Tree;
  o.engine.tree_nodes = 4;
  o.engine.tree_width = 2;
  o.engine.tree_depth = 3;
  o.engine.spec.adaptive = false;
  o.engine.n_threads = 2;
  o.reps = 1;
  o.min_rep_seconds = 0;
  o.m_max = 6;
  o.prefill_chunk = 32;
  o.bandwidth_bytes = 0;
  o.max_tokens = 12;
  o.end_to_end = true;
  o.compare_chain = true;
  o.prompts = {"the cat", "a b c"};
  o.simulate_tree_profiles = {{0.6, 0.2}, {0.8}};
  o.simulate_tree_nodes = {4, 8};  // 8 is capped at m_max - 1 = 5
  const BenchReport r = run_bench(o);
  EXPECT_EQ(r.end_to_end.drafter, "draft-model-tree");
  EXPECT_EQ(r.end_to_end_chain.drafter, "draft-model");
  EXPECT_EQ(r.end_to_end.n_outputs_differ, 0);
  EXPECT_EQ(r.end_to_end_chain.n_outputs_differ, 0);
  EXPECT_GT(r.end_to_end.spec_stats.n_drafted, 0);
  EXPECT_GT(r.end_to_end_chain.spec_stats.n_drafted, 0);
  ASSERT_EQ(r.tree_simulations.size(), 2u);
  ASSERT_EQ(r.tree_simulations[0].points.size(), 2u);
  EXPECT_EQ(r.tree_simulations[0].points[1].nodes, 5);
  EXPECT_EQ(r.tree_simulations[0].c_draft_source, "draft model forward");
  EXPECT_DOUBLE_EQ(r.tree_simulations[0].points[0].verify_cost, r.short_curve.cost[4]);
  // A one-rank profile is a chain: the tree equals it.
  EXPECT_DOUBLE_EQ(r.tree_simulations[1].points[0].tree_tokens, r.tree_simulations[1].points[0].chain_tokens);
  const std::string text = bench_report_text(r);
  EXPECT_NE(text.find("SIMULATION, token trees"), std::string::npos) << text;
  EXPECT_NE(text.find("--compare-chain"), std::string::npos) << text;
  const nlohmann::json j = nlohmann::json::parse(bench_report_json(r));
  EXPECT_EQ(j["tree_simulation"].size(), 2u);
  EXPECT_EQ(j["tree_simulation"][0]["label"], "SIMULATION");
  EXPECT_EQ(j["end_to_end_chain"]["drafter"], "draft-model");

  BenchOptions bad = o;
  bad.simulate_tree_profiles = {{0.7, 0.5}};
  EXPECT_THROW(run_bench(bad), Error);
  bad = o;
  bad.engine.method = SpecMethod::Draft;
  bad.engine.tree_nodes = 0;
  EXPECT_THROW(run_bench(bad), Error);  // --compare-chain without a tree
}

}  // namespace
}  // namespace specdec
