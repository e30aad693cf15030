// spec/draft_model_tree.cpp — DraftModelDrafter::propose_tree: token trees expanded level by
// level by path probability (EAGLE-2 style), with children drawn by spec/tree_children.h.
//
// Node selection. Each node's score is the product of the draft probabilities along its path
// (its estimated acceptance). Per level, the tree_width best-scoring nodes of the level are
// expanded (their draft distributions come from one forward).
//   * Deterministic children (greedy decoding, or ChildRule::Deterministic): every expanded node
//     gets its tree_width most probable tokens as candidates, and at the end the n_max best
//     candidates of the whole tree are kept (EAGLE-2's re-ranking). A child never scores above
//     its parent, so the kept set is a tree. Pruning is exact here: the candidates are a
//     deterministic function of the context. Levels stop early once no deeper node can enter the
//     n_max best.
//   * Sampled children (IndependentWithReplacement, WithoutReplacement): acceptance is exact
//     only when each node's child count is fixed BEFORE its children are drawn and children are
//     never pruned afterwards. So the budget and the choice of nodes to expand are settled
//     first (best score first, min(tree_width, budget left) children each) and every drawn child
//     stays.
//
// The model's batch attends to its whole cache prefix, so sibling branches cannot stay in the
// cache between levels (a later row would see its uncles): each level forwards the ancestors of
// the nodes to expand together with them as ONE tree batch (parent indices) after the context,
// then truncates the cache back to the context. The cache therefore never holds draft nodes
// after propose_tree, and accept() has nothing to compact: accepted tokens are caught up at the
// next propose(). Cost per level: one draft forward over at most tree_width * depth rows.
#include <algorithm>
#include <functional>
#include <numeric>

#include "spec/tree_children.h"
#include "specdec/acceptance.h"
#include "specdec/draft_model.h"
#include "specdec/error.h"

namespace specdec {

namespace {

struct Expansion {
  int node;           // draft node index, -1 for the root
  SparseDist q;       // the draft's distribution after the node (children are drawn from it)
  SparseDist expand;  // the distribution used to pick children (q, or q at temperature 1 when greedy)
};

// Nodes `keep` (sorted so that parents come first) of `tree`, re-indexed.
Draft select_nodes(const Draft& tree, const std::vector<int>& keep) {
  Draft out;
  out.rule = tree.rule;
  std::vector<int32_t> new_index(static_cast<size_t>(tree.size()), -1);
  for (int node : keep) {
    const int32_t parent = tree.parent[static_cast<size_t>(node)];
    SPECDEC_CHECK(parent < 0 || new_index[static_cast<size_t>(parent)] >= 0, "draft tree: kept node without its parent");
    new_index[static_cast<size_t>(node)] =
        out.add(tree.tokens[static_cast<size_t>(node)], parent < 0 ? -1 : new_index[static_cast<size_t>(parent)],
                tree.q.empty() ? SparseDist{} : tree.q[static_cast<size_t>(node)]);
  }
  return out;
}

}  // namespace

std::vector<std::vector<float>> DraftModelDrafter::forward_tree_nodes(const Draft& draft, const std::vector<int>& nodes,
                                                                      int n_ctx_tokens) {
  std::vector<int> rows_of_node(static_cast<size_t>(draft.size()), -1);  // (n_nodes) batch row, -1: absent
  std::vector<int> needed;  // the nodes and their ancestors
  for (int node : nodes) {
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
    const bool want = std::find(nodes.begin(), nodes.end(), node) != nodes.end();
    batch_.add(draft.tokens[static_cast<size_t>(node)], n_ctx_tokens - 1 + depths[static_cast<size_t>(node)],
               parent < 0 ? -1 : rows_of_node[static_cast<size_t>(parent)], 0, want);
  }
  KvCache* caches[] = {&cache_};
  model_.forward(batch_, caches, logits_);
  cache_.truncate(n_ctx_tokens);
  std::vector<std::vector<float>> out;  // (nodes.size(), n_vocab_draft)
  for (int node : nodes) {
    const int row = rows_of_node[static_cast<size_t>(node)];
    const auto it = std::find(logits_.batch_row.begin(), logits_.batch_row.end(), row);
    SPECDEC_CHECK(it != logits_.batch_row.end(), "draft tree: missing logits row");
    const int out_row = static_cast<int>(it - logits_.batch_row.begin());
    out.emplace_back(logits_.row(out_row), logits_.row(out_row) + logits_.n_vocab);
  }
  return out;
}

Draft DraftModelDrafter::propose_tree(std::span<const Token> context, int n_max, const SamplingParams& sampling) {
  Draft draft;  // all nodes drawn (deterministic children: all candidates, pruned at the end)
  draft.rule = options_.tree_rule;
  const int n_ctx_tokens = static_cast<int>(context.size());
  const int width = options_.tree_width;
  const bool deterministic = sampling.greedy() || draft.rule == ChildRule::Deterministic;
  int budget = std::min(options_.tree_nodes, n_max);  // sampled children: nodes left to draw
  // Greedy target: children are the draft's most probable tokens (temperature 1 for ranking),
  // verified greedily; their q is not used.
  SamplingParams ranking = sampling;
  if (sampling.greedy()) ranking.temperature = 1.0f;
  const std::vector<Token> history(context.begin(), context.end());
  auto distributions = [&](std::vector<float>& logits, int node) {
    std::vector<Token> node_history = history;
    const std::vector<Token> path = path_tokens(draft, node);
    node_history.insert(node_history.end(), path.begin(), path.end());
    SparseDist q = make_distribution(masked(logits), sampling, node_history);
    SparseDist expand = sampling.greedy() ? make_distribution(masked(logits), ranking, node_history) : q;
    return Expansion{node, std::move(q), std::move(expand)};
  };

  std::vector<float> root_logits = sync(context);  // (n_vocab_draft) after the last context token
  std::vector<Expansion> frontier = {distributions(root_logits, -1)};
  std::vector<double> score;  // (n_nodes) path probability of each node
  const int limit = deterministic ? n_max : budget;
  for (int depth = 1; depth <= options_.tree_depth && limit > 0 && !frontier.empty(); ++depth) {
    std::vector<int> level;  // nodes added at this depth
    for (Expansion& f : frontier) {
      if (!deterministic && budget <= 0) break;
      if (p_min_ > 0.0f && *std::max_element(f.expand.probs.begin(), f.expand.probs.end()) < p_min_) continue;
      const int n_children = deterministic ? width : std::min(width, budget);
      const double parent_score = f.node < 0 ? 1.0 : score[static_cast<size_t>(f.node)];
      const ChildRule pick = deterministic ? ChildRule::Deterministic : draft.rule;
      for (Token x : choose_children(f.expand, n_children, pick, rng_)) {
        level.push_back(draft.add(x, f.node, draft.rule == ChildRule::Deterministic ? SparseDist{} : f.q));
        // min(): rounding must never rank a child above its parent.
        score.push_back(std::min(parent_score, parent_score * static_cast<double>(f.expand.prob(x))));
        --budget;
      }
    }
    if (depth == options_.tree_depth || level.empty() || (!deterministic && budget <= 0)) break;

    // The next frontier: the `width` most probable new paths (ties: lower node index).
    std::stable_sort(level.begin(), level.end(),
                     [&](int a, int b) { return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)]; });
    level.resize(std::min(level.size(), static_cast<size_t>(width)));
    if (deterministic && draft.size() >= n_max) {
      // Deeper nodes score at most their parent: stop when none could enter the n_max best.
      std::vector<double> sorted = score;
      std::nth_element(sorted.begin(), sorted.begin() + (n_max - 1), sorted.end(), std::greater<double>());
      if (score[static_cast<size_t>(level.front())] < sorted[static_cast<size_t>(n_max - 1)]) break;
    }
    std::vector<std::vector<float>> logits = forward_tree_nodes(draft, level, n_ctx_tokens);
    std::vector<Expansion> next;
    for (size_t i = 0; i < level.size(); ++i) next.push_back(distributions(logits[i], level[i]));
    frontier = std::move(next);
  }
  if (!deterministic || draft.size() <= n_max) return draft;

  // EAGLE-2 re-ranking: the n_max best nodes (parents first: a child never scores above its
  // parent, and on ties the shallower, earlier node wins).
  std::vector<int> order(static_cast<size_t>(draft.size()));
  std::iota(order.begin(), order.end(), 0);
  const std::vector<int32_t> depths = node_depths(draft);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (score[static_cast<size_t>(a)] != score[static_cast<size_t>(b)]) return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)];
    return depths[static_cast<size_t>(a)] < depths[static_cast<size_t>(b)];
  });
  order.resize(static_cast<size_t>(n_max));
  std::sort(order.begin(), order.end());  // node indices: parents before children
  return select_nodes(draft, order);
}

}  // namespace specdec
