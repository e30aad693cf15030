// specdec/draft_model.h — drafting with a second, smaller model (issue 3), chains or token
// trees (issue 9), and the vocabulary check between draft and target.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "specdec/acceptance.h"
#include "specdec/drafter.h"
#include "specdec/model.h"
#include "specdec/rng.h"
#include "specdec/tokenizer.h"

namespace specdec {

// What the vocabulary check looks at (a Tokenizer, or plain tables in tests).
struct VocabView {
  std::string model;                              // "llama" | "gpt2"
  int n_vocab = 0;
  std::function<std::string(Token)> text;         // token text of an id in [0, n_vocab)
  SpecialTokens special;
  static VocabView of(const Tokenizer& tokenizer);
};

// Draft and target must agree on the tokenizer model, on every id they both have and on the
// special-token ids (bos, eos, eot). A draft vocabulary that is the target's with padding at the
// end, or up to max_shorter entries shorter, is accepted (q = 0 for the ids the draft lacks).
// Throws Error naming the first differing token (id and both texts) otherwise. Cost: O(n_vocab).
void check_vocab_compatible(const VocabView& target, const VocabView& draft, int max_shorter = 128);

struct DraftModelOptions {
  int n_ctx = 0;            // draft cache length (0: the draft model's context length)
  int n_vocab_target = 0;   // draft ids >= this get q = 0 (a padded draft vocabulary); 0: no mask
  // Token trees (issue 9): tree_nodes > 0 drafts a tree of at most min(tree_nodes, n_max) nodes,
  // expanding per level the tree_width most probable paths (product of draft probabilities, as
  // in EAGLE-2) with up to tree_width children each, down to tree_depth (0: as deep as the node
  // budget; docs/HEADS.md "No depth cap by default"). Deterministic children
  // (greedy, or tree_rule Deterministic) are re-ranked: the n_max most probable nodes of the
  // expanded tree are kept (see draft_model_tree.cpp).
  int tree_nodes = 0;
  int tree_width = 2;
  int tree_depth = 0;
  float tree_rank_temperature = 1.0f;  // greedy: ranking temperature (spec/tree_expand.h)
  ChildRule tree_rule = ChildRule::Deterministic;  // how children are drawn (and verified)
  PlantedBug bug = PlantedBug::None;  // testing hook: QRecomputedAfter, TransformOnPOnly
};

// A second Transformer with its own KV cache. Chains: drafts autoregressively, sampling each
// token from q = make_distribution(draft logits, the target's sampling params, history) and
// recording that q (never recomputed); stops early when its confidence (q's top probability;
// under greedy decoding, the top probability at temperature 1) is below p_min. The cache
// holds a prefix of the committed tokens (plus forwarded draft tokens until accept()): it is
// truncated on rejection and catches up on accepted/bonus tokens at the next propose().
// Randomness: an Rng seeded from sampling.seed at the first propose() after begin().
// Chains of several drafters sharing one draft model can also be proposed together, one shared
// draft forward per level (BatchedDraft, specdec/batched_draft.h), with identical results.
class DraftModelDrafter : public Drafter {
 public:
  // draft_model must outlive the drafter. Throws Error for bad options (naming them).
  DraftModelDrafter(Transformer& draft_model, const DraftModelOptions& options = {});

  std::string name() const override { return options_.tree_nodes > 0 ? "draft-model-tree" : "draft-model"; }
  // Prefills the draft cache with prompt[0 .. size-1) (reusing a shared cached prefix).
  void begin(std::span<const Token> prompt) override;
  Draft propose(std::span<const Token> context, int n_max, const SamplingParams& sampling) override;
  void accept(const Draft& draft, const Verdict& verdict) override;
  void rollback(int n_tokens) override;
  void set_p_min(float p_min) override { p_min_ = p_min; }
  double draft_seconds() const override { return draft_seconds_; }

  // For tests: the draft cache and the tokens it holds, in order (between propose() and
  // accept() of a tree, the cache also holds the expanded tree nodes after these).
  const KvCache& cache() const { return cache_; }
  std::span<const Token> cached_tokens() const { return cached_; }
  // Draft-model rows forwarded since construction (prefill, catch-up, chain and tree nodes).
  int64_t forwarded_rows() const { return forwarded_rows_; }
  // Draft-model forward calls made by this drafter itself since construction (the shared
  // forwards of a BatchedDraft are counted there, not here).
  int64_t forwards() const { return forwards_; }
  // True when propose() can run inside a BatchedDraft (chains; trees draft alone).
  bool batchable() const { return options_.tree_nodes == 0; }
  const Transformer& model() const { return model_; }
  // Tree nodes forwarded (expanded) by the last tree proposal.
  int last_expanded() const { return last_expanded_; }

 private:
  friend class BatchedDraft;  // drives the chain steps below for several drafters at once

  // A chain proposal as a sequence of steps, each one draft forward (shared with other
  // sequences by BatchedDraft; propose() runs them with forwards of its own rows alone):
  //   start_chain(context, n_max, sampling)   reseeds/truncates, queues the catch-up tokens
  //   while (add_step_rows(batch, seq, max_rows) > 0):
  //     forward(batch) -> take_step_logits(logits, row)   samples the next draft token
  //   finish_chain(seconds) -> the Draft
  // The draws, q and cache contents equal those of the one-shot loop whatever the batch (the
  // draft model is batch invariant), so a batched proposal is bit-identical to a lone one.
  void start_chain(std::span<const Token> context, int n_max, const SamplingParams& sampling);
  // Shared start of every proposal (seeds the Rng once, drops tree rows); returns n_max capped
  // to the draft positions left.
  int start_proposal(std::span<const Token> context, int n_max, const SamplingParams& sampling);
  // Appends this drafter's rows for the next forward as sequence `seq` (at most max_rows >= 1,
  // the last one with logits when it ends the pending tokens); returns the count (0: done).
  int add_step_rows(Batch& batch, int32_t seq, int max_rows);
  // True when the rows added last asked for logits.
  bool step_wants_logits() const { return step_.want_logits; }
  // After the forward that carried add_step_rows' rows: `row` = this drafter's logits row in
  // `logits` (-1 when it asked for none).
  void take_step_logits(const Logits& logits, int row);
  Draft finish_chain(double seconds);
  // Samples draft token step_.i from step_.logits, or ends the chain (n_max, p_min).
  void draw_next();
  // The draft's confidence in its next token for p_min: q's top probability, or under greedy
  // decoding (q one-hot) the top probability at temperature 1. Cost: O(n_vocab) when greedy.
  float confidence(const SparseDist& q);
  // Makes the cache hold context[0 .. n) and returns the logits of the last row.
  std::vector<float> sync(std::span<const Token> context);
  // Forwards `tokens` as a chain after the cache (no logits unless want_last).
  void forward_chain(std::span<const Token> tokens, bool want_last, std::vector<float>* last_logits);
  std::span<const float> masked(std::vector<float>& logits) const;
  Draft propose_tree(std::span<const Token> context, int n_max, const SamplingParams& sampling);
  // One forward appending `nodes` of `tree` (one level; their ancestors already forwarded, at
  // drawn_slot_) to the cache after the n_ctx_tokens context; returns each node's logits
  // (nodes.size(), n_vocab_draft) and records its slot.
  std::vector<std::vector<float>> forward_tree_level(const Draft& tree, const std::vector<int>& nodes, int n_ctx_tokens);
  // Keeps the accepted path's forwarded rows after the context (keep_rows); drops the others.
  void accept_tree(const Draft& draft, const Verdict& verdict);
  // Truncates the cache to cached_ (drops tree rows of a proposal never accepted).
  void drop_tree_rows();

  Transformer& model_;
  DraftModelOptions options_;
  KvCache cache_;                // (n_layers, n_kv_heads, n_ctx, head_dim) draft K/V of cached_
  std::vector<Token> cached_;    // (n_cached) tokens in the cache, in order
  Rng rng_;
  bool seeded_ = false;
  float p_min_ = 0.0f;
  int propose_base_ = 0;         // context length at the last propose()
  int n_forwarded_ = 0;          // draft tokens of the last chain proposal left in the cache
  double draft_seconds_ = 0.0;
  int64_t forwarded_rows_ = 0;
  int last_expanded_ = 0;
  std::vector<int> drawn_slot_;     // (n_drawn) cache slot of each drawn tree node, -1: not forwarded
  std::map<std::vector<Token>, int> forwarded_path_slot_;  // forwarded node's path tokens -> its slot
  std::vector<int> tree_slot_;      // (n_nodes) cache slot of each node of the last tree proposal, or -1
  std::vector<Token> tree_tokens_;  // (n_nodes) the last tree proposal's tokens (to recognise it in accept)
  struct ChainStep {
    SamplingParams sampling;
    int n_max = 0, i = 0;            // tokens drawn so far (i) of at most n_max
    Draft draft;
    std::vector<Token> history;      // (context + drawn) penalty history
    std::vector<Token> pending;      // (n_pending) tokens still to forward (catch-up or the last draw)
    size_t pending_pos = 0;          // next pending token to forward
    int rows_in_flight = 0;          // rows added to the current forward
    bool want_logits = false;        // the rows in flight end with a logits row
    bool pending_is_draft = false;   // pending holds a drawn token (counts in n_forwarded_)
    bool done = true;
    std::vector<float> logits;       // (n_vocab_draft) after the last forwarded token
    std::vector<SparseDist> q_after; // QRecomputedAfter only: q one row late
  };
  ChainStep step_;
  int64_t forwards_ = 0;
  Batch batch_;                  // scratch
  Logits logits_;                // scratch (n_rows, n_vocab)
};

}  // namespace specdec
