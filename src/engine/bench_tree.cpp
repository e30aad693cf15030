// engine/bench_tree.cpp — the SIMULATION of chain vs token tree at equal node budget for
// `specdec bench --simulate-tree PROFILE` (issue 9): positional acceptance model, best-first
// (optimal) trees, and the predicted speedup from the measured verify cost c(N + 1). Arithmetic
// only: no model is run here.
#include <algorithm>
#include <queue>
#include <string>

#include "specdec/bench.h"
#include "specdec/error.h"

namespace specdec {

namespace {

void check_profile(const std::vector<double>& profile) {
  if (profile.empty()) throw Error("tree simulation: empty acceptance profile");
  double sum = 0;
  for (double a : profile) {
    if (!(a >= 0.0 && a <= 1.0)) throw Error("tree simulation: acceptance " + std::to_string(a) + " outside [0, 1]");
    sum += a;
  }
  if (sum > 1.0 + 1e-9) throw Error("tree simulation: profile sums to " + std::to_string(sum) + ", above 1");
}

}  // namespace

double SimTree::expected_tokens() const {
  double e = 1.0;
  for (double v : value) e += v;
  return e;
}

SimTree best_first_tree(const std::vector<double>& profile, int n_nodes) {
  check_profile(profile);
  if (n_nodes < 0) throw Error("tree simulation: node budget " + std::to_string(n_nodes) + " must be >= 0");
  struct Candidate {
    double value;
    int depth;
    int parent;  // -1: the root
    int rank;
    long order;  // insertion order, for ties
    bool operator<(const Candidate& o) const {  // priority_queue: the "largest" pops first
      if (value != o.value) return value < o.value;
      if (depth != o.depth) return depth > o.depth;
      return order > o.order;
    }
  };
  const int width = static_cast<int>(profile.size());
  SimTree tree;
  std::vector<int> depth_of;  // (n_nodes)
  std::priority_queue<Candidate> candidates;
  long order = 0;
  candidates.push({profile[0], 1, -1, 0, order++});
  while (static_cast<int>(tree.parent.size()) < n_nodes && !candidates.empty()) {
    const Candidate c = candidates.top();
    candidates.pop();
    const int node = static_cast<int>(tree.parent.size());
    tree.parent.push_back(c.parent);
    tree.rank.push_back(c.rank);
    tree.value.push_back(c.value);
    depth_of.push_back(c.depth);
    tree.depth = std::max(tree.depth, c.depth);
    if (c.parent < 0) ++tree.root_children;
    // The node's first child, and its parent's next child.
    candidates.push({c.value * profile[0], c.depth + 1, node, 0, order++});
    if (c.rank + 1 < width) {
      const double parent_value = c.parent < 0 ? 1.0 : tree.value[static_cast<size_t>(c.parent)];
      candidates.push({parent_value * profile[static_cast<size_t>(c.rank + 1)], c.depth, c.parent, c.rank + 1, order++});
    }
  }
  return tree;
}

TreeSimulation simulate_tree_vs_chain(const std::vector<double>& profile, const std::vector<int>& nodes, double c_draft,
                                      const std::string& c_draft_source, const CostCurve& curve, double decode_tps) {
  check_profile(profile);
  if (c_draft < 0) throw Error("c_draft " + std::to_string(c_draft) + " must be >= 0");
  TreeSimulation sim;
  sim.profile = profile;
  sim.c_draft = c_draft;
  sim.c_draft_source = c_draft_source;
  for (int n : nodes) {
    if (n < 1 || static_cast<size_t>(n) >= curve.cost.size())
      throw Error("tree simulation: node budget " + std::to_string(n) + " needs c(M) up to M = " + std::to_string(n + 1) +
                  " (measured up to " + std::to_string(curve.cost.size()) + ")");
    TreeSimPoint p;
    p.nodes = n;
    const SimTree chain = best_first_tree({profile[0]}, n);
    const SimTree tree = best_first_tree(profile, n);
    p.chain_tokens = chain.expected_tokens();
    p.tree_tokens = tree.expected_tokens();
    p.tree_depth = tree.depth;
    p.tree_root_children = tree.root_children;
    p.verify_cost = curve.cost[static_cast<size_t>(n)];
    // Drafting: a chain of N costs N draft forwards, a tree one forward per level.
    p.chain_speedup = p.chain_tokens / (n * c_draft + p.verify_cost);
    p.tree_speedup = p.tree_tokens / (tree.depth * c_draft + p.verify_cost);
    p.chain_tps = decode_tps * p.chain_speedup;
    p.tree_tps = decode_tps * p.tree_speedup;
    sim.points.push_back(p);
  }
  return sim;
}

}  // namespace specdec
