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
#include "specdec/flat_table.h"

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
// insertion order or hash-map iteration order. Each entry owns a heap vector, so an update may
// allocate: this is the persistent LookupCache's table (updated once per sequence, pruned by
// count); the per-token window tables are FlatNgramTable below.
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

// Counts of next tokens per hashed context in one flat, bounded array: what NgramDrafter updates
// for every committed token. Each context's slot holds its total and kInline candidates inline;
// a context with more distinct next tokens chains the rest through a preallocated overflow pool.
// Counts are exact (every distinct next token is kept, so removals are exact and best() equals
// NgramTable::best on the same observations). Updates never allocate except when the context
// array or the pool doubles on the way to its bound (O(log bound) times over the table's life).
class FlatNgramTable {
 public:
  static constexpr int kInline = 4;

  // max_contexts / max_pairs: the most distinct contexts / distinct (context, next token) pairs
  // held at once (>= 1); memory is O(max_contexts + max_pairs). A window of W tokens gives at
  // most W of each. Throws Error when a bound is 0.
  FlatNgramTable(size_t max_contexts, size_t max_pairs);

  // Adds one observation of `token` after context `key` at position `pos` (the most recent
  // position wins ties). Returns false, recording nothing, when the observation would need a
  // new context or pair beyond the bounds. Cost: O(n_distinct_next of the context).
  bool add(uint64_t key, Token token, uint32_t pos);
  // Removes one observation of `token` after `key` (InternalError unless it is there). The
  // context disappears at total 0. Cost: O(n_distinct_next).
  void remove(uint64_t key, Token token);
  // Same contracts as NgramTable::best / top (order 0 in the result).
  NgramPrediction best(uint64_t key) const;
  std::vector<NgramPrediction> top(uint64_t key, int n_max) const;

  size_t size() const { return contexts_.size(); }  // distinct contexts
  size_t n_pairs() const { return n_pairs_; }        // distinct (context, next) pairs
  size_t max_contexts() const { return contexts_.max_size(); }
  size_t max_pairs() const { return max_pairs_; }
  size_t slot_count() const { return contexts_.slot_count(); }
  size_t home_slot(uint64_t key) const { return contexts_.home_slot(key); }
  // Empties the table, keeping its memory. Cost: O(slot_count).
  void clear();

 private:
  struct Context {
    uint32_t total = 0;
    int32_t n_inline = 0;
    int32_t overflow = -1;  // first overflow node (index into pool_), -1: none
    NgramTable::Next next[kInline];  // (n_inline) unordered
  };
  struct OverflowNode {
    NgramTable::Next next;
    int32_t link;  // next node of the same context, or of the free list; -1: none
  };
  template <typename F>
  static void for_each_next(const Context& c, const std::vector<OverflowNode>& pool, F&& f);
  int32_t new_node(const NgramTable::Next& next, int32_t link);
  void free_node(int32_t node);

  FlatKeyTable<Context> contexts_;
  std::vector<OverflowNode> pool_;  // (<= max_pairs) overflow candidates, grown by doubling
  int32_t free_ = -1;               // free list through OverflowNode::link
  size_t max_pairs_;
  size_t n_pairs_ = 0;
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
  std::vector<FlatNgramTable> tables_;   // (max_order + 1) index = order; orders < min_order unused
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
