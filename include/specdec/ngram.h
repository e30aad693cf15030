// specdec/ngram.h — model-free drafting from n-gram statistics of the text itself.
//
// An n-gram of order n is (n - 1) context tokens followed by the token that came next. Contexts
// are hashed (ngram_key) into 64-bit keys; a table maps each key to the counts of the tokens that
// followed it. NgramDrafter keeps such tables over a sliding window of the committed tokens and
// predicts greedily, longest order first, chaining its own predictions.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "specdec/drafter.h"

namespace specdec {

class LookupCache;

// Key of the context `context` (the n - 1 tokens before the predicted one) for order n =
// context.size() + 1. Part of the lookup-cache file format: changing it needs a new version.
// Cost: O(context.size()).
uint64_t ngram_key(std::span<const Token> context);

// A prediction read from an n-gram table.
struct NgramPrediction {
  Token token = -1;        // -1: the context was never seen
  uint32_t count = 0;      // how often `token` followed the context
  uint32_t total = 0;      // how often the context was followed by anything
  int order = 0;           // order of the table that answered (0 when none did)
  // Count-based confidence in [0, 1): count / (total + 1), so a single observation gives 1/2
  // and n agreeing observations give n / (n + 1).
  float confidence() const { return total == 0 ? 0.0f : float(count) / float(total + 1); }
};

// Counts of next tokens per hashed context. Deterministic: the answer never depends on
// insertion order or hash-map iteration order.
class NgramTable {
 public:
  struct Next {
    Token token;
    uint32_t count;
    uint32_t last_pos;   // position of the most recent occurrence (tie-break: more recent wins)
  };
  struct Entry {
    uint32_t total = 0;
    std::vector<Next> next;  // (n_distinct_next) unordered
  };

  // Adds `count` observations of `token` after context `key` seen last at `pos`.
  // max_next > 0 bounds the distinct next tokens kept per context: a new token then replaces the
  // least frequent one (ties: the oldest, then the highest id). Cost: O(n_distinct_next).
  void add(uint64_t key, Token token, uint32_t count = 1, uint32_t pos = 0, int max_next = 0);
  // Removes one observation of `token` after `key` (the entry disappears at count 0).
  // Requires that it was added. Cost: O(n_distinct_next).
  void remove(uint64_t key, Token token);
  // Most frequent next token of `key` (ties: the most recent, then the lowest id); token -1 when
  // the key is absent. Cost: O(n_distinct_next).
  NgramPrediction best(uint64_t key) const;
  // The up to n_max most frequent next tokens of `key`, best first (same order as best()).
  // Empty when the key is absent. Cost: O(n_distinct_next * log).
  std::vector<NgramPrediction> top(uint64_t key, int n_max) const;

  size_t size() const { return entries_.size(); }
  void clear() { entries_.clear(); }
  const std::unordered_map<uint64_t, Entry>& entries() const { return entries_; }
  std::unordered_map<uint64_t, Entry>& mutable_entries() { return entries_; }

 private:
  std::unordered_map<uint64_t, Entry> entries_;
};

// A drafter that can tell how much it trusts its last proposal (model-free drafters).
class ConfidentDrafter : public Drafter {
 public:
  // (n_nodes of the last proposal) estimated probability that node i is accepted given that its
  // parent was, in [0, 1].
  virtual const std::vector<float>& last_confidence() const = 0;
  // Adds the committed tokens not yet recorded to the persistent cache, if the drafter has one
  // (begin() of the next sequence does it too). Call before saving the cache.
  virtual void flush_to_cache() {}
};

struct NgramConfig {
  int min_order = 2;              // shortest n-gram used for predictions (context of 1 token)
  int max_order = 4;              // longest n-gram (context of 3 tokens)
  int window = 512;               // the tables hold the n-grams ending in the last `window` tokens
  uint32_t min_count = 1;         // an order answers only if its context was seen this often
  float min_confidence = 0.0f;    // stop chaining at the first node less confident than this
  // Token trees (issue 9): tree_width > 1 proposes a tree instead of a chain: each node's
  // children are the tree_width most frequent continuations of its context, and nodes are
  // added best first by path probability (product of count / total along the path) until the
  // node budget n_max is spent, down to tree_depth (0: no depth limit). The children are a
  // deterministic function of the context, so the tree is verified with ChildRule::Deterministic.
  int tree_width = 1;
  int tree_depth = 0;
};

// Multi-order n-gram drafter over a sliding window of the committed tokens, with an optional
// persistent LookupCache consulted when no window table knows the context.
// Memory: O(window * (max_order - min_order + 1)) table entries plus the committed tokens.
class NgramDrafter : public ConfidentDrafter {
 public:
  // Throws Error for orders outside [2, 16], min_order > max_order or window < 1.
  // `cache` may be null; when given, every committed sequence is also added to it (flush_to_cache).
  explicit NgramDrafter(NgramConfig config = {}, std::shared_ptr<LookupCache> cache = nullptr);

  std::string name() const override { return config_.tree_width > 1 ? "ngram-tree" : "ngram"; }
  // Cost of begin/accept/rollback: O(new tokens * n_orders); rollback that removes tokens
  // rebuilds the window, O(window * n_orders).
  void begin(std::span<const Token> prompt) override;
  // Syncs with `context` (appending or rolling back as needed), then chains up to n_max greedy
  // predictions. Deterministic draft: q empty, ChildRule::Deterministic.
  Draft propose(std::span<const Token> context, int n_max, const SamplingParams& sampling) override;
  // Learns the accepted tokens of `draft` along verdict.path and verdict.next. The draft need
  // not be this drafter's own proposal (the hybrid drafter forwards the one it used).
  void accept(const Draft& draft, const Verdict& verdict) override;
  void rollback(int n_tokens) override;
  double draft_seconds() const override { return draft_seconds_; }
  // The decoder's --draft-p-min: chains stop at the first node whose count-based confidence is
  // below max(p_min, config.min_confidence).
  void set_p_min(float p_min) override { p_min_ = p_min; }
  const std::vector<float>& last_confidence() const override { return last_confidence_; }

  // Prediction for the position after `tail` (the last committed/predicted tokens): longest order
  // first; at each order the window table, then the cache. Cost: O(n_orders * max_order).
  NgramPrediction predict(std::span<const Token> tail) const;
  // Up to n_max candidates for the position after `tail`, best first, from the longest order
  // whose window table knows the context (several candidates), else from the cache (its best).
  std::vector<NgramPrediction> predict_top(std::span<const Token> tail, int n_max) const;
  void flush_to_cache() override;

  const NgramConfig& config() const { return config_; }
  int n_committed() const { return static_cast<int>(history_.size()); }
  // Number of contexts held by the window table of `order` (for memory-bound tests).
  size_t table_size(int order) const;

 private:
  void append(Token token);
  void add_ngrams_ending_at(int pos);
  void remove_ngrams_ending_at(int pos);
  void rebuild_window();
  void sync(std::span<const Token> context);
  Draft propose_tree(int n_max);  // ngram_tree.cpp

  NgramConfig config_;
  std::shared_ptr<LookupCache> cache_;
  std::vector<Token> history_;           // (n_committed) all committed tokens
  std::vector<NgramTable> tables_;       // (max_order + 1) index = order; orders < min_order unused
  std::vector<float> last_confidence_;   // (n_nodes of the last proposal)
  int n_flushed_ = 0;                    // history_[0, n_flushed_) is already in the cache
  float p_min_ = 0.0f;
  double draft_seconds_ = 0.0;
};

// How many leading tokens of `known` (what a drafter has seen) the committed `context` shares.
// Cost O(1) in the usual case: when the last 64 tokens of the shorter sequence agree, the
// prefixes are taken to agree (context only ever grows or is cut back through the Drafter
// calls); otherwise the first difference is searched, O(n).
size_t committed_prefix_length(std::span<const Token> known, std::span<const Token> context);

// Appends to `out` up to n_max tokens predicted by `predict` (a callable: span<const Token> tail
// -> NgramPrediction), each from the context `tail` extended by the tokens predicted so far,
// stopping at the first position without a prediction or below min_confidence. `confidence`
// receives one value per predicted token. Used by the n-gram and lookup drafters.
template <typename Predict>
void chain_predictions(std::span<const Token> tail, int n_max, float min_confidence,
                       const Predict& predict, std::vector<Token>& out, std::vector<float>& confidence) {
  std::vector<Token> work(tail.begin(), tail.end());  // (tail + predicted)
  for (int i = 0; i < n_max; ++i) {
    NgramPrediction p = predict(std::span<const Token>(work));
    if (p.token < 0 || p.confidence() < min_confidence) break;
    out.push_back(p.token);
    confidence.push_back(p.confidence());
    work.push_back(p.token);
  }
}

}  // namespace specdec
