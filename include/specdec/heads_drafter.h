// specdec/heads_drafter.h — self-speculation drafters reading the target's own features
// (docs/HEADS.md): Medusa heads (a fixed tree of top-k candidates) and the EAGLE layer (a
// dynamic tree drafted at the feature level). Both say wants_features(), so the decoder hands
// them the target's features of the committed tokens before every proposal.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "specdec/acceptance.h"
#include "specdec/drafter.h"
#include "specdec/heads.h"
#include "specdec/rng.h"

namespace specdec {

struct MedusaOptions {
  // The candidate tree: choice {a, b, ...} is the node reached by the rank-a token of head 0,
  // then the rank-b token of head 1, ... (ranks by head logit, ties: lower id). A proposal of
  // at most n_max nodes takes the first n_max usable choices, so list the likeliest first;
  // every choice's prefix must come before it. Empty: the tree tuned for the heads
  // (MedusaHeads::tree()), or Medusa's 63-node tree (mc_sim_7b_63) when the file has none.
  std::vector<std::vector<int>> choices;
  PlantedBug bug = PlantedBug::None;  // testing hook: DeterministicAsSampled
};

// Medusa-1. At a proposal over committed x_0..x_{n-1}: x_{n-1} was emitted from the target's
// logits at f_{n-2}, the feature of the last token in the target cache, and head k on f_{n-2}
// predicts x_{n+k}, i.e. depth k + 1 of the tree rooted at x_{n-1}. Children are deterministic
// (top-k ranks, no q), verified with ChildRule::Deterministic, so acceptance is exact under
// greedy decoding and sampling. No state besides the features: accept/rollback are no-ops.
// Cost per proposal: n_heads * n_blocks (n_embd x n_embd) products + one output head pass
// over n_heads rows.
class MedusaDrafter : public Drafter {
 public:
  // target and heads must outlive the drafter. Error for an invalid choice list (naming it).
  MedusaDrafter(Transformer& target, const MedusaHeads& heads, MedusaOptions options = {});
  std::string name() const override { return "medusa"; }
  void begin(std::span<const Token> prompt) override { (void)prompt; }
  Draft propose(std::span<const Token> context, int n_max, const SamplingParams& sampling) override;
  void accept(const Draft& draft, const Verdict& verdict) override { (void)draft, (void)verdict; }
  bool wants_features() const override { return true; }
  void set_features(std::span<const float> features, int n_embd) override;
  double draft_seconds() const override { return draft_seconds_; }
  // Medusa's 63-node tree of choices (mc_sim_7b_63).
  static std::vector<std::vector<int>> default_choices();

 private:
  Transformer& target_;
  const MedusaHeads& heads_;
  MedusaOptions options_;
  std::span<const float> features_;  // (n_committed - 1, n_embd), from the decoder
  double draft_seconds_ = 0.0;
};

struct EagleOptions {
  int n_ctx = 0;          // the layer's cache length (0: its context length)
  int tree_nodes = 0;     // node budget (0: the decoder's K); capped by the decoder's K
  int tree_width = 2;     // greedy: children per node and paths per level (1: a chain)
  // Sampling: the same, 1 by default. Sampled children cannot be pruned after drawing, so a
  // tree splits a small node budget into shallow levels: on the tuning split (docs/HEADS.md)
  // chains gave 2.25 / 2.17 tokens per pass at K = 4 and T = 1, width-2 trees 1.96 / 1.97.
  int sampled_tree_width = 1;
  // Deepest level (0: as deep as the node budget). A cap of 5 (EAGLE-2's depth) held the demo
  // layer to 5.7 tokens per pass at K = 16 where uncapped trees reach 10.3 (docs/HEADS.md).
  int tree_depth = 0;
  // Greedy: children and paths ranked at this temperature (spec/tree_expand.h). With a fixed
  // budget 0.5 drafted 1-4% longer on the demo corpus's tuning split (a layer trained on the
  // target's soft distribution is under-confident about its top token), but with adaptive K
  // (the default) it drafted less: docs/HEADS.md. Hence 1 by default.
  float tree_rank_temperature = 1.0f;
  ChildRule tree_rule = ChildRule::WithoutReplacement;  // how children are drawn when sampling
  PlantedBug bug = PlantedBug::None;  // testing hook: TransformOnPOnly
};

// EAGLE with EAGLE-2 dynamic trees. The layer's cache holds entries t = 0..n-2 (entry t fed
// f_t, the target's true feature, and x_{t+1}); a proposal catches up on the entries committed
// since the last one (at least the last, whose output g_{n-2} gives the root distribution),
// then expands a tree (spec/tree_expand.h): node x at depth d is fed (x, g of its parent) at
// position n-2+d, one layer forward per level over the nodes expanded, kept in the cache as a
// tree until the proposal ends, when the cache is truncated back to the committed entries
// (the accepted positions are recomputed from the target's true features at the next
// proposal). Greedy: deterministic top-width children; sampling: children drawn from q (the
// target's sampling transform on Output(g)) with tree_rule, q recorded.
// Randomness: an Rng seeded from sampling.seed at the first proposal after begin().
class EagleDrafter : public Drafter {
 public:
  // target and layer must outlive the drafter. Error for bad options (naming them).
  EagleDrafter(Transformer& target, EagleLayer& layer, const EagleOptions& options = {});
  std::string name() const override { return "eagle"; }
  // Forwards the prompt's entries through the layer (as the first proposal would).
  void catch_up(std::span<const Token> prompt) override;
  void begin(std::span<const Token> prompt) override;
  Draft propose(std::span<const Token> context, int n_max, const SamplingParams& sampling) override;
  void accept(const Draft& draft, const Verdict& verdict) override { (void)draft, (void)verdict; }
  void rollback(int n_tokens) override;
  void set_p_min(float p_min) override { p_min_ = p_min; }
  bool wants_features() const override { return true; }
  std::vector<int32_t> feature_layers() const override { return layer_.fuse_layers(); }
  void set_features(std::span<const float> features, int row_width) override;
  double draft_seconds() const override { return draft_seconds_; }
  // For tests: the layer's cache (committed entries only between proposals).
  const KvCache& cache() const { return cache_; }

 private:
  // Makes the cache hold entries 0..n-2 of context (n = context.size() >= 2); returns g_{n-2}.
  std::vector<float> sync(std::span<const Token> context);
  std::vector<std::vector<float>> forward_level(const Draft& draft, const std::vector<int>& nodes, int n_committed);

  Transformer& target_;
  EagleLayer& layer_;
  EagleOptions options_;
  KvCache cache_;                     // (1, n_kv_heads, n_ctx, head_dim) entries of cached_ (+ tree nodes inside propose)
  std::vector<Token> cached_;         // (cache entries + 1) tokens x_0..x_m the entries were fed, or empty
  std::span<const float> features_;   // (n_committed - 1, layer_.feature_width()), from the decoder
  std::vector<float> slot_;           // (rows, n_embd) scratch: fused feature slots of a catch-up chunk
  std::vector<float> root_g_;         // (n_embd) g_{n-2} of the current proposal
  std::vector<float> node_g_;         // (n_nodes, n_embd) g of every forwarded tree node
  std::vector<int> node_slot_;        // (n_nodes) cache slot of every forwarded tree node, -1 if none
  Rng rng_;
  bool seeded_ = false;
  float p_min_ = 0.0f;
  double draft_seconds_ = 0.0;
  Batch batch_;                       // scratch
};

}  // namespace specdec
