// spec/draft_model_tree.cpp — DraftModelDrafter::propose_tree and its cache bookkeeping: token
// trees expanded level by level by path probability (EAGLE-2 style, spec/tree_expand.h, shared
// with the EAGLE drafter), with children drawn by spec/tree_children.h.
//
// Each tree node is forwarded through the draft model at most once. The nodes chosen for
// expansion at one level go through ONE draft forward, appended to the draft cache after the
// context; each row sees the context and its own ancestors among the earlier levels' rows
// (Batch::cache_ancestors), never its siblings or uncles, so its logits and K/V equal those
// of its path decoded as a chain. After verification accept() keeps only the accepted path's
// rows (KvCache::keep_rows), contiguous after the context; the next propose() catches up on
// what the cache lacks (the accepted leaf, if it was never expanded, and the bonus or
// correction token). Cost per proposal: one forward per level over at most `width` rows, plus
// that catch-up: (nodes expanded) + (at most 2) draft rows, instead of re-forwarding ancestors.
#include <algorithm>
#include <map>

#include "spec/tree_expand.h"
#include "specdec/acceptance.h"
#include "specdec/draft_model.h"
#include "specdec/error.h"

namespace specdec {

void DraftModelDrafter::drop_tree_rows() {
  if (cache_.size() > static_cast<int>(cached_.size())) cache_.truncate(static_cast<int>(cached_.size()));
  tree_slot_.clear();
  drawn_slot_.clear();
  forwarded_path_slot_.clear();
  last_expanded_ = 0;
}

std::vector<std::vector<float>> DraftModelDrafter::forward_tree_level(const Draft& tree, const std::vector<int>& nodes,
                                                                      int n_ctx_tokens) {
  batch_.clear();
  const int first_slot = cache_.size();
  std::vector<int32_t> ancestors;  // (depth - 1) cache slots of one node's ancestors, root first
  for (int node : nodes) {
    ancestors.clear();
    for (int a = tree.parent[static_cast<size_t>(node)]; a >= 0; a = tree.parent[static_cast<size_t>(a)]) {
      SPECDEC_CHECK(static_cast<size_t>(a) < drawn_slot_.size() && drawn_slot_[static_cast<size_t>(a)] >= 0,
                    "draft tree: expanding a node whose parent was never forwarded");
      ancestors.push_back(drawn_slot_[static_cast<size_t>(a)]);
    }
    std::reverse(ancestors.begin(), ancestors.end());
    batch_.add_cached_tree_row(tree.tokens[static_cast<size_t>(node)], n_ctx_tokens + static_cast<int32_t>(ancestors.size()),
                               -1, 0, true, n_ctx_tokens, ancestors);
  }
  KvCache* caches[] = {&cache_};
  model_.forward(batch_, caches, logits_);
  forwarded_rows_ += static_cast<int64_t>(nodes.size());
  last_expanded_ += static_cast<int>(nodes.size());
  std::vector<std::vector<float>> out;  // (nodes.size(), n_vocab_draft)
  for (size_t r = 0; r < nodes.size(); ++r) {
    const size_t node = static_cast<size_t>(nodes[r]);
    if (drawn_slot_.size() <= node) drawn_slot_.resize(node + 1, -1);
    drawn_slot_[node] = first_slot + static_cast<int>(r);
    forwarded_path_slot_[path_tokens(tree, nodes[r])] = drawn_slot_[node];
    SPECDEC_CHECK(logits_.batch_row[r] == static_cast<int32_t>(r), "draft tree: missing logits row");
    out.emplace_back(logits_.row(static_cast<int>(r)), logits_.row(static_cast<int>(r)) + logits_.n_vocab);
  }
  return out;
}

Draft DraftModelDrafter::propose_tree(std::span<const Token> context, int n_max, const SamplingParams& sampling) {
  const int n_ctx_tokens = static_cast<int>(context.size());
  std::vector<float> root_logits = sync(context);  // (n_vocab_draft) after the last context token
  SPECDEC_CHECK(cache_.size() == n_ctx_tokens, "draft tree: cache does not hold the context");
  TreeExpandOptions shape;
  shape.width = options_.tree_width;
  shape.rank_temperature = options_.tree_rank_temperature;
  // At most width * (depth - 1) nodes are forwarded: near the end of the cache the tree is shallower.
  shape.budget = std::min(options_.tree_nodes, n_max);
  const int depth_cap = options_.tree_depth > 0 ? options_.tree_depth : shape.budget;
  shape.depth = std::min(depth_cap, 1 + (cache_.capacity() - n_ctx_tokens) / options_.tree_width);
  shape.rule = options_.tree_rule;
  shape.p_min = p_min_;
  shape.bug = options_.bug;
  forwarded_path_slot_.clear();
  const LevelLogits level_logits = [&](const Draft& drawn, const std::vector<int>& nodes) {
    std::vector<std::vector<float>> logits = forward_tree_level(drawn, nodes, n_ctx_tokens);
    for (std::vector<float>& row : logits) masked(row);
    return logits;
  };
  Draft draft;
  try {
    draft = expand_tree(masked(root_logits), context, n_max, sampling, shape, rng_, level_logits);
  } catch (...) {
    drop_tree_rows();
    throw;
  }
  // Each node's K/V depend only on its path, so a kept node's row is that of the forwarded node
  // with the same path (expand_tree may re-index when it prunes).
  tree_slot_.assign(static_cast<size_t>(draft.size()), -1);
  for (int i = 0; i < draft.size(); ++i) {
    const auto it = forwarded_path_slot_.find(path_tokens(draft, i));
    if (it != forwarded_path_slot_.end()) tree_slot_[static_cast<size_t>(i)] = it->second;
  }
  tree_tokens_ = draft.tokens;
  return draft;
}

void DraftModelDrafter::accept_tree(const Draft& draft, const Verdict& verdict) {
  // Not the last proposal (a stale shadow draft): keep only the committed tokens.
  if (draft.tokens != tree_tokens_ || static_cast<int>(cached_.size()) != propose_base_) {
    drop_tree_rows();
    return;
  }
  std::vector<int> rows;  // accepted nodes' rows, as offsets from the context's end
  for (int32_t node : verdict.path) {
    const int slot = tree_slot_[static_cast<size_t>(node)];
    if (slot < 0) break;  // an accepted leaf that was never expanded: caught up next time
    rows.push_back(slot - propose_base_);
    cached_.push_back(draft.tokens[static_cast<size_t>(node)]);
  }
  if (rows.empty()) {
    cache_.truncate(propose_base_);
  } else {
    cache_.keep_rows(propose_base_, rows);
  }
  tree_slot_.clear();
  tree_tokens_.clear();
}

}  // namespace specdec
