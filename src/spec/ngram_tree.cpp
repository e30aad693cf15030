// NgramDrafter::propose_tree and predict_top: token trees from the n-gram tables (issue 9).
//
// Best-first expansion: every candidate (a continuation of an existing node, or of the root)
// carries its estimated path probability, the product of the continuations' count-based
// probabilities along the path (see expand() below). The best candidate becomes a node, then its own continuations become candidates. A
// child's probability never exceeds its parent's, so the nodes form a tree whatever the budget.
// The children depend only on the committed context (no randomness), hence ChildRule::
// Deterministic, which is exact for any such set of children.
#include <algorithm>
#include <queue>

#include "specdec/lookup_cache.h"
#include "specdec/ngram.h"

namespace specdec {

std::vector<NgramPrediction> NgramDrafter::predict_top(std::span<const Token> tail, int n_max) const {
  // Longest order first; lower orders (and the cache) add distinct tokens until n_max, so a
  // context seen only once at the longest order still offers alternatives.
  std::vector<NgramPrediction> out;
  auto add = [&](const NgramPrediction& p) {
    if (static_cast<int>(out.size()) >= n_max || p.token < 0) return;
    if (std::none_of(out.begin(), out.end(), [&](const NgramPrediction& o) { return o.token == p.token; })) out.push_back(p);
  };
  const int top = std::max(config_.max_order, cache_ ? cache_->config().max_order : 0);
  const int bottom = std::min(config_.min_order, cache_ ? cache_->config().min_order : 16);
  for (int order = top; order >= bottom && static_cast<int>(out.size()) < n_max; --order) {
    const size_t n_ctx = static_cast<size_t>(order - 1);
    if (order >= config_.min_order && order <= config_.max_order && tail.size() >= n_ctx) {
      std::vector<NgramPrediction> found = tables_[static_cast<size_t>(order)].top(ngram_key(tail.last(n_ctx)), n_max);
      if (!found.empty() && found.front().total >= config_.min_count) {
        for (auto& p : found) {
          p.order = order;
          add(p);
        }
      }
    }
    if (cache_) add(cache_->predict_order(tail, order));
  }
  return out;
}

namespace {

struct Candidate {
  double score;     // path probability
  int32_t parent;   // draft node index, -1 for the root
  int depth;        // depth of the candidate node (root children: 1)
  NgramPrediction prediction;
  int sequence;     // insertion order (ties: earlier first, so the result is deterministic)
  bool operator<(const Candidate& o) const {  // priority_queue: largest first
    if (score != o.score) return score < o.score;
    return sequence > o.sequence;
  }
};

}  // namespace

Draft NgramDrafter::propose_tree(int n_max) {
  Draft draft;
  draft.rule = ChildRule::Deterministic;
  const float min_confidence = std::max(config_.min_confidence, p_min_);
  const int top = std::max(config_.max_order, cache_ ? cache_->config().max_order : 0);
  const size_t n_tail = std::min(history_.size(), static_cast<size_t>(top - 1));
  const std::vector<Token> root_tail(history_.end() - static_cast<std::ptrdiff_t>(n_tail), history_.end());
  std::priority_queue<Candidate> candidates;
  int sequence = 0;
  // Pushes the continuations of `node` (whose context ends with `tail`).
  auto expand = [&](const std::vector<Token>& tail, int32_t node, int depth, double score) {
    if (config_.tree_depth > 0 && depth > config_.tree_depth) return;
    // Path probability estimate: count / (total + 1) at the longest order (the confidence: 1 /
    // (total + 1) is left for continuations never seen there); candidates from lower orders
    // share the mass the longer order's candidates leave.
    double left = 1.0;  // mass not yet given to a longer order's candidates
    double left_next = 1.0;
    int order = -1;
    for (const NgramPrediction& p : predict_top(tail, config_.tree_width)) {
      if (p.order != order) {
        left = left_next;
        order = p.order;
      }
      const double share = static_cast<double>(p.confidence());
      left_next = std::max(0.0, left_next - left * share);
      if (p.confidence() < min_confidence) continue;
      candidates.push(Candidate{score * left * share, node, depth, p, sequence++});
    }
  };
  expand(root_tail, -1, 1, 1.0);
  while (draft.size() < n_max && !candidates.empty()) {
    const Candidate c = candidates.top();
    candidates.pop();
    const int node = draft.add(c.prediction.token, c.parent);
    last_confidence_.push_back(c.prediction.confidence());
    std::vector<Token> tail = root_tail;  // context + path, last top - 1 tokens are enough
    const std::vector<Token> path = [&] {
      std::vector<Token> p;
      for (int32_t a = node; a >= 0; a = draft.parent[static_cast<size_t>(a)]) p.push_back(draft.tokens[static_cast<size_t>(a)]);
      std::reverse(p.begin(), p.end());
      return p;
    }();
    tail.insert(tail.end(), path.begin(), path.end());
    if (tail.size() > static_cast<size_t>(top - 1)) tail.erase(tail.begin(), tail.end() - (top - 1));
    expand(tail, node, c.depth + 1, c.score);
  }
  draft.q.clear();  // deterministic draft: no q
  return draft;
}

}  // namespace specdec
