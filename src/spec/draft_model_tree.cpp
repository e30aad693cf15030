// spec/draft_model_tree.cpp — DraftModelDrafter::propose_tree: token trees expanded level by
// level by path probability (EAGLE-2 style), with children drawn by spec/tree_children.h.
//
// Exactness: acceptance is exact when each node's children are n draws by the recorded rule with
// n fixed BEFORE drawing them. So the budget and the choice of which nodes to expand are settled
// before a node's children are drawn, and children are never pruned afterwards.
//
// The model's batch attends to its whole cache prefix, so sibling branches cannot stay in the
// cache between levels: each level forwards the ancestors of the nodes to expand as one tree
// batch after the context and truncates the cache back to the context afterwards. The cache
// therefore never holds draft nodes after propose_tree, and accept() has nothing to compact:
// accepted tokens are caught up at the next propose().
#include <algorithm>
#include <numeric>

#include "spec/tree_children.h"
#include "specdec/acceptance.h"
#include "specdec/draft_model.h"
#include "specdec/error.h"

namespace specdec {

namespace {

struct Frontier {
  int node;        // draft node index, -1 for the root
  double score;    // product of draft probabilities along the path
  SparseDist q;    // the draft's distribution after the node (children are drawn from it)
  SparseDist expand;  // the distribution used to pick children (q, or q at temperature 1 when greedy)
};

}  // namespace

Draft DraftModelDrafter::propose_tree(std::span<const Token> context, int n_max, const SamplingParams& sampling) {
  Draft draft;
  draft.rule = options_.tree_rule;
  const int n_ctx_tokens = static_cast<int>(context.size());
  int budget = std::min(options_.tree_nodes, n_max);
  const int width = options_.tree_width;
  // Greedy target: children are the draft's most probable tokens (temperature 1 for ranking),
  // verified greedily; their q is not used.
  SamplingParams ranking = sampling;
  if (sampling.greedy()) ranking.temperature = 1.0f;

  std::vector<float> logits = sync(context);  // (n_vocab_draft) after the last context token
  std::vector<Token> history(context.begin(), context.end());
  std::vector<Frontier> frontier;
  {
    SparseDist q = make_distribution(masked(logits), sampling, history);
    SparseDist expand = sampling.greedy() ? make_distribution(masked(logits), ranking, history) : q;
    frontier.push_back({-1, 1.0, std::move(q), std::move(expand)});
  }
  std::vector<double> score;  // (n_nodes) path probability of each node

  for (int depth = 1; depth <= options_.tree_depth && budget > 0 && !frontier.empty(); ++depth) {
    // Expand the frontier nodes best first (the frontier holds at most `width` of them).
    std::vector<int> children_here;  // new nodes of this depth
    for (Frontier& f : frontier) {
      if (budget <= 0) break;
      if (p_min_ > 0.0f && *std::max_element(f.expand.probs.begin(), f.expand.probs.end()) < p_min_) continue;
      const int n_children = std::min(width, budget);
      const ChildRule pick = sampling.greedy() ? ChildRule::Deterministic : draft.rule;
      for (Token x : choose_children(f.expand, n_children, pick, rng_)) {
        const int node = draft.add(x, f.node, draft.rule == ChildRule::Deterministic ? SparseDist{} : f.q);
        score.push_back(f.score * static_cast<double>(f.expand.prob(x)));
        children_here.push_back(node);
        --budget;
      }
    }
    if (depth == options_.tree_depth || budget <= 0 || children_here.empty()) break;

    // The next frontier: the `width` most probable new paths (ties: lower node index).
    std::stable_sort(children_here.begin(), children_here.end(),
                     [&](int a, int b) { return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)]; });
    children_here.resize(std::min(children_here.size(), static_cast<size_t>(width)));

    // One forward over the ancestors of the nodes to expand, as a tree after the context.
    std::vector<int> rows_of_node(static_cast<size_t>(draft.size()), -1);
    std::vector<int> needed;
    for (int node : children_here) {
      for (int a = node; a >= 0 && rows_of_node[static_cast<size_t>(a)] == -1; a = draft.parent[static_cast<size_t>(a)]) {
        rows_of_node[static_cast<size_t>(a)] = 0;
        needed.push_back(a);
      }
    }
    std::sort(needed.begin(), needed.end());  // parents before children
    const std::vector<int32_t> depths = node_depths(draft);
    batch_.clear();
    for (size_t r = 0; r < needed.size(); ++r) {
      const int node = needed[r];
      rows_of_node[static_cast<size_t>(node)] = static_cast<int>(r);
      const int parent = draft.parent[static_cast<size_t>(node)];
      const bool want = std::find(children_here.begin(), children_here.end(), node) != children_here.end();
      batch_.add(draft.tokens[static_cast<size_t>(node)], n_ctx_tokens - 1 + depths[static_cast<size_t>(node)],
                 parent < 0 ? -1 : rows_of_node[static_cast<size_t>(parent)], 0, want);
    }
    KvCache* caches[] = {&cache_};
    model_.forward(batch_, caches, logits_);
    cache_.truncate(n_ctx_tokens);

    std::vector<Frontier> next;
    for (int node : children_here) {
      const int row = rows_of_node[static_cast<size_t>(node)];
      const auto it = std::find(logits_.batch_row.begin(), logits_.batch_row.end(), row);
      SPECDEC_CHECK(it != logits_.batch_row.end(), "draft tree: missing logits row");
      const int out_row = static_cast<int>(it - logits_.batch_row.begin());
      logits.assign(logits_.row(out_row), logits_.row(out_row) + logits_.n_vocab);
      std::vector<Token> node_history = history;
      const std::vector<Token> path = path_tokens(draft, node);
      node_history.insert(node_history.end(), path.begin(), path.end());
      SparseDist q = make_distribution(masked(logits), sampling, node_history);
      SparseDist expand = sampling.greedy() ? make_distribution(masked(logits), ranking, node_history) : q;
      next.push_back({node, score[static_cast<size_t>(node)], std::move(q), std::move(expand)});
    }
    frontier = std::move(next);
  }
  return draft;
}

}  // namespace specdec
