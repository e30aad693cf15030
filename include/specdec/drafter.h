// specdec/drafter.h — what every drafter (draft model, n-gram, prompt lookup, trees, heads)
// hands to the verifier, and what it gets back.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "specdec/sampling.h"

namespace specdec {

// Length of the longest common prefix of two token sequences (cache reuse: how much of a cached
// sequence a new context keeps). Cost: O(min(|a|, |b|)).
inline size_t common_prefix_length(std::span<const Token> a, std::span<const Token> b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
}

// How the children of one node were produced; acceptance must use the matching rule.
enum class ChildRule : uint8_t {
  Deterministic,               // no q (n-gram, lookup, top-k branches): q is one-hot / absent
  IndependentWithReplacement,  // each child drawn independently from the node's q (SpecInfer)
  WithoutReplacement,          // children drawn from q one after another without replacement
};

// A draft is a token tree; a chain is the tree with parent[i] = i - 1.
// Node i's parent is parent[i] (< i) or -1 for a child of the last committed token (the root).
struct Draft {
  std::vector<Token> tokens;     // (n_nodes)
  std::vector<int32_t> parent;   // (n_nodes)
  // (n_nodes) distribution node i was drawn from (the draft's distribution at its parent, after
  // the shared sampling transform), or empty for a deterministic draft. Siblings drawn from the
  // same distribution carry the same q.
  std::vector<SparseDist> q;
  ChildRule rule = ChildRule::Deterministic;

  int size() const { return static_cast<int>(tokens.size()); }
  bool empty() const { return tokens.empty(); }
  bool is_chain() const;
  void clear();
  // Appends a node and returns its index.
  int add(Token token, int32_t parent, SparseDist q = {});
};

// The outcome of verifying a draft: the accepted node indices from the root down (a path in
// the tree; node indices, not tokens, because siblings may carry the same token), then the
// token the target emits after them (the correction at the first rejection, or the bonus).
struct Verdict {
  std::vector<int32_t> path;
  Token next = -1;
  int n_accepted() const { return static_cast<int>(path.size()); }
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual std::string name() const = 0;
  // Start of a new sequence whose committed tokens are `prompt`.
  virtual void begin(std::span<const Token> prompt) = 0;
  // Proposes up to n_max nodes continuing `context` (all committed tokens: prompt + generated;
  // the last one is not yet in the target's cache). `sampling` is the transform the target
  // uses; drafters that sample apply it to their own logits to get q.
  virtual Draft propose(std::span<const Token> context, int n_max, const SamplingParams& sampling) = 0;
  // The verifier's decision on the last proposal; the drafter rolls its state back to the
  // accepted path and learns verdict.next (which it did not produce or may have).
  virtual void accept(const Draft& draft, const Verdict& verdict) = 0;
  // The committed sequence was cut back to its first n tokens (a stop string, a new request
  // sharing a prefix...). Default: begin() again is the caller's job.
  virtual void rollback(int n_tokens) { (void)n_tokens; }
  // Drafters with a confidence stop end a proposal where their top probability falls below
  // p_min (0: off). Default: ignored (drafters without probabilities).
  virtual void set_p_min(float p_min) { (void)p_min; }
  // Self-speculation (Medusa, EAGLE; docs/HEADS.md): true when the drafter reads the target's
  // features. The decoder then asks the target forward for the feature of every row it commits
  // to the target cache and calls set_features() before every propose(). Default: false (the
  // decoder then asks for none, at no cost).
  virtual bool wants_features() const { return false; }
  // EAGLE-3 style fusion: the target blocks (0-based) whose residual stream (after the block,
  // before any norm) the drafter reads besides f_t, in this order. Asked once per begin().
  // Default: none.
  virtual std::vector<int32_t> feature_layers() const { return {}; }
  // features (n_committed - 1, row_width) row-major: row t = [r^{l_1}_t, .., r^{l_k}_t, f_t]
  // (feature_layers() = l_1..l_k; row_width = (k + 1) * n_embd), f_t the target's feature at
  // committed token t (every committed token but the last, whose row the next verify computes).
  // Valid until the decoder's next begin(), step() or rollback().
  virtual void set_features(std::span<const float> features, int row_width) {
    (void)features;
    (void)row_width;
  }
  // Called by the decoder right after begin(), with the prompt's features already shared
  // (set_features) when wants_features(): a drafter that otherwise catches up lazily at its
  // first proposal (the EAGLE layer's cache over the prompt) does it here, in the prefill,
  // so that the first timed proposal does not charge a prompt's worth of work to c_draft (the
  // decoder counts the prompt as seen at begin()). Default: nothing.
  virtual void catch_up(std::span<const Token> prompt) { (void)prompt; }
  // Seconds spent in propose() since construction (for c_draft).
  virtual double draft_seconds() const { return 0.0; }
};

}  // namespace specdec
