// spec/tree_expand.cpp — see tree_expand.h.
#include "spec/tree_expand.h"

#include <algorithm>
#include <numeric>

#include "spec/tree_children.h"
#include "specdec/error.h"

namespace specdec {

namespace {

struct Frontier {
  int node;           // draft node index, -1 for the root
  SparseDist q;       // the transformed distribution after the node (children are drawn from it)
  SparseDist expand;  // the one ranking children (q, or q at temperature 1 under greedy)
  SparseDist record;  // the q recorded on the children (q; planted bug: untransformed)
  float top_prob;     // the highest probability of the draft at temperature 1 (greedy) or of q
};

// The n_max best nodes of `tree` by score (ties: shallower, then earlier), parents first.
Draft best_nodes(const Draft& tree, const std::vector<double>& score, int n_max) {
  std::vector<int> order(static_cast<size_t>(tree.size()));
  std::iota(order.begin(), order.end(), 0);
  const std::vector<int32_t> depths = node_depths(tree);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (score[static_cast<size_t>(a)] != score[static_cast<size_t>(b)]) return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)];
    return depths[static_cast<size_t>(a)] < depths[static_cast<size_t>(b)];
  });
  order.resize(static_cast<size_t>(n_max));
  std::sort(order.begin(), order.end());
  Draft out;
  out.rule = tree.rule;
  std::vector<int32_t> new_index(static_cast<size_t>(tree.size()), -1);  // (n_nodes)
  for (int node : order) {
    const int32_t parent = tree.parent[static_cast<size_t>(node)];
    SPECDEC_CHECK(parent < 0 || new_index[static_cast<size_t>(parent)] >= 0, "tree: kept node without its parent");
    new_index[static_cast<size_t>(node)] = out.add(tree.tokens[static_cast<size_t>(node)],
                                                   parent < 0 ? -1 : new_index[static_cast<size_t>(parent)],
                                                   tree.q.empty() ? SparseDist{} : tree.q[static_cast<size_t>(node)]);
  }
  return out;
}

}  // namespace

Draft expand_tree(std::span<const float> root_logits, std::span<const Token> context, int n_max,
                  const SamplingParams& sampling, const TreeExpandOptions& options, Rng& rng,
                  const LevelLogits& level_logits) {
  Draft draft;
  draft.rule = options.rule;
  const bool deterministic = sampling.greedy() || options.rule == ChildRule::Deterministic;
  const ChildRule pick = deterministic ? ChildRule::Deterministic : options.rule;
  int budget = std::min(options.budget, n_max);
  if (!(options.rank_temperature > 0.0f))
    throw Error("tree: rank temperature " + std::to_string(options.rank_temperature) + " must be > 0");
  SamplingParams plain = sampling;  // greedy: the draft's own distribution, at temperature 1
  if (sampling.greedy()) plain.temperature = 1.0f;
  SamplingParams ranking = plain;  // greedy: children ranked at the rank temperature
  if (sampling.greedy()) ranking.temperature = options.rank_temperature;
  SamplingParams raw;  // planted TransformOnPOnly: q recorded as the plain softmax
  raw.temperature = 1.0f;
  raw.top_k = 0;
  raw.top_p = 1.0f;
  raw.min_p = 0.0f;
  auto frontier_of = [&](std::span<const float> logits, int node) {
    std::vector<Token> history(context.begin(), context.end());
    const std::vector<Token> path = path_tokens(draft, node);
    history.insert(history.end(), path.begin(), path.end());
    Frontier f{node, make_distribution(logits, sampling, history), {}, {}, 0.0f};
    f.expand = sampling.greedy() ? make_distribution(logits, ranking, history) : f.q;
    f.record = options.bug == PlantedBug::TransformOnPOnly ? make_distribution(logits, raw, history) : f.q;
    if (options.p_min > 0.0f) {
      const bool recalibrated = sampling.greedy() && options.rank_temperature != 1.0f;
      const SparseDist at_one = recalibrated ? make_distribution(logits, plain, history) : SparseDist{};
      const SparseDist& confidence = recalibrated ? at_one : f.expand;
      f.top_prob = *std::max_element(confidence.probs.begin(), confidence.probs.end());
    }
    return f;
  };

  std::vector<Frontier> frontier = {frontier_of(root_logits, -1)};
  std::vector<double> score;  // (n_nodes) path probability
  const int limit = deterministic ? n_max : budget;
  // Deterministic trees keep the n_max best nodes, an ancestor-closed set (a child never scores
  // above its parent, and ties go to the shallower): no node deeper than n_max can be kept.
  const int deepest = deterministic ? std::min(options.depth, n_max) : options.depth;
  for (int depth = 1; depth <= deepest && limit > 0 && !frontier.empty(); ++depth) {
    std::vector<int> level;  // nodes added at this depth
    for (const Frontier& f : frontier) {
      if (!deterministic && budget <= 0) break;
      if (options.p_min > 0.0f && f.top_prob < options.p_min) continue;
      const int n_children = deterministic ? options.width : std::min(options.width, budget);
      const double parent_score = f.node < 0 ? 1.0 : score[static_cast<size_t>(f.node)];
      for (Token x : choose_children(f.expand, n_children, pick, rng)) {
        level.push_back(draft.add(x, f.node, options.rule == ChildRule::Deterministic ? SparseDist{} : f.record));
        score.push_back(std::min(parent_score, parent_score * static_cast<double>(f.expand.prob(x))));
        --budget;
      }
    }
    if (depth == deepest || level.empty() || (!deterministic && budget <= 0)) break;
    std::stable_sort(level.begin(), level.end(),
                     [&](int a, int b) { return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)]; });
    level.resize(std::min(level.size(), static_cast<size_t>(options.width)));
    if (deterministic && draft.size() >= n_max) {
      // Deeper nodes score at most their parent: a node scoring below the n_max-th best has no
      // descendant that could be kept, so it is not expanded (level is sorted, best first).
      std::vector<double> sorted = score;
      std::nth_element(sorted.begin(), sorted.begin() + (n_max - 1), sorted.end(), std::greater<double>());
      while (!level.empty() && score[static_cast<size_t>(level.back())] < sorted[static_cast<size_t>(n_max - 1)]) level.pop_back();
      if (level.empty()) break;
    }
    const std::vector<std::vector<float>> logits = level_logits(draft, level);
    SPECDEC_CHECK(logits.size() == level.size(), "tree: level logits for " + std::to_string(logits.size()) + " of " +
                                                     std::to_string(level.size()) + " nodes");
    std::vector<Frontier> next;
    for (size_t i = 0; i < level.size(); ++i) next.push_back(frontier_of(logits[i], level[i]));
    frontier = std::move(next);
  }
  if (!deterministic || draft.size() <= n_max) return draft;
  return best_nodes(draft, score, n_max);
}

}  // namespace specdec
