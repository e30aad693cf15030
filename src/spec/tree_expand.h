// spec/tree_expand.h — EAGLE-2 style dynamic token trees for drafters that score children with
// their own distributions (the EAGLE drafter): level by level, the most probable paths (product
// of draft probabilities) are expanded, children drawn by spec/tree_children.h.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "specdec/acceptance.h"
#include "specdec/drafter.h"
#include "specdec/sampling.h"

namespace specdec {

class Rng;

struct TreeExpandOptions {
  int width = 2;        // children per expanded node, and nodes expanded per level
  int depth = 5;        // deepest level
  int budget = 8;       // sampled children: nodes drawn in all (deterministic: n_max best kept)
  ChildRule rule = ChildRule::WithoutReplacement;  // how children are drawn under sampling
  float p_min = 0.0f;   // nodes whose top draft probability is below this are not expanded
  // Greedy only: children and paths are ranked by softmax(logits / rank_temperature), a
  // calibration of the draft's confidence to the chance that the target's argmax agrees (a
  // draft trained on the target's soft distribution is under-confident about its top token;
  // docs/HEADS.md). It never changes which token is a node's best child, nor p_min's test
  // (always at temperature 1).
  float rank_temperature = 1.0f;
  PlantedBug bug = PlantedBug::None;  // testing hook: TransformOnPOnly records q untransformed
};

// Logits (nodes.size(), n_vocab) after each of `nodes` of `draft` (called once per level with
// the nodes chosen for expansion, parents always expanded earlier).
using LevelLogits = std::function<std::vector<std::vector<float>>(const Draft& draft, const std::vector<int>& nodes)>;

// Draws the tree. Deterministic children (greedy sampling or rule Deterministic): every expanded
// node gets its `width` most probable tokens and the n_max best-scoring nodes are kept (a child
// never scores above its parent, so they form a tree); exact because the tree is a deterministic
// function of the context. Sampled children: each node's child count is fixed before drawing
// and nothing is pruned afterwards, q[i] = make_distribution(parent's logits, sampling, history)
// is the distribution node i was drawn from (draft.rule = options.rule). Cost: at most
// depth - 1 calls of level_logits (deterministic: min(depth, n_max) - 1) over at most `width`
// nodes each; deterministic trees skip nodes that can no longer enter the n_max best.
Draft expand_tree(std::span<const float> root_logits, std::span<const Token> context, int n_max,
                  const SamplingParams& sampling, const TreeExpandOptions& options, Rng& rng,
                  const LevelLogits& level_logits);

}  // namespace specdec
