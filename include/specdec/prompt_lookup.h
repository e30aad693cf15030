// specdec/prompt_lookup.h — prompt-lookup drafting (as in prompt-lookup decoding and vLLM's
// `ngram` method): find the most recent earlier occurrence of the last n committed tokens, for n
// from lookup_max down to lookup_min, and propose the tokens that followed it.
//
// Index: for each n, a hash map from the rolling hash of an n-gram to the last position where it
// ends, plus a per-position link to the previous position with the same hash (hash chains), so
// each lookup is O(lookup_max + chain steps) and appending a token is O(n_sizes), whatever the
// context length. Hash matches are verified token by token, so collisions never give a wrong
// match.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "specdec/flat_table.h"
#include "specdec/ngram.h"

namespace specdec {

class LookupCache;

struct PromptLookupConfig {
  int lookup_min = 2;        // shortest suffix matched
  int lookup_max = 4;        // longest suffix matched (tried first)
  int max_chain_steps = 64;  // hash-chain entries examined per lookup (bounds adversarial inputs)
  int max_match_length = 32; // the common-suffix length behind confidence is counted up to this
  // Token trees (issue 9): tree_width > 1 proposes the continuations of up to tree_width
  // earlier occurrences (longest suffix first, then most recent) merged into a tree (a trie:
  // branches share their common prefix), each branch at most tree_depth tokens (0: n_max),
  // within the node budget n_max. Deterministic children (ChildRule::Deterministic).
  int tree_width = 1;
  int tree_depth = 0;
};

// Result of one lookup (also exposed for tests).
struct LookupMatch {
  int n = 0;             // suffix length matched (0: no match)
  int end = -1;          // position of the last token of the earlier occurrence
  int match_length = 0;  // common suffix length of the two occurrences, >= n, capped
};

class PromptLookupDrafter : public ConfidentDrafter {
 public:
  // Throws Error unless 1 <= lookup_min <= lookup_max <= 64. `cache` (may be null) is consulted
  // when the context has no match, and receives the committed tokens (flush_to_cache).
  explicit PromptLookupDrafter(PromptLookupConfig config = {}, std::shared_ptr<LookupCache> cache = nullptr);

  std::string name() const override { return config_.tree_width > 1 ? "lookup-tree" : "lookup"; }
  void begin(std::span<const Token> prompt) override;
  // Syncs with `context`, looks the suffix up and proposes up to n_max following tokens as a
  // chain. When the match ends just before the suffix the proposal continues periodically (the
  // tokens it proposes are themselves the continuation). Deterministic draft.
  // Confidence of every node: match_length / (match_length + 1) (cache predictions: their
  // count-based confidence).
  Draft propose(std::span<const Token> context, int n_max, const SamplingParams& sampling) override;
  void accept(const Draft& draft, const Verdict& verdict) override;
  // O(removed tokens * n_sizes).
  void rollback(int n_tokens) override;
  double draft_seconds() const override { return draft_seconds_; }
  // The decoder's --draft-p-min: no proposal from a match (or cache node) less confident.
  void set_p_min(float p_min) override { p_min_ = p_min; }
  const std::vector<float>& last_confidence() const override { return last_confidence_; }

  // The most recent earlier occurrence of the committed suffix (no match: n == 0).
  LookupMatch find() const;
  // Up to n_matches earlier occurrences at distinct positions, in the order find() prefers them
  // (longest suffix first, then most recent); find() is the first. Cost: O(n_sizes * chain steps).
  std::vector<LookupMatch> find_all(int n_matches) const;
  void flush_to_cache() override;

  const PromptLookupConfig& config() const { return config_; }
  int n_committed() const { return static_cast<int>(history_.size()); }
  const LookupMatch& last_match() const { return last_match_; }

 private:
  void append(Token token);
  void sync(std::span<const Token> context);
  uint64_t range_hash(int first, int n) const;   // hash of history_[first, first + n)
  void index_ngrams_ending_at(int end);
  void unindex_ngrams_ending_at(int end);
  LookupMatch match_at(int n, int end) const;  // the match of the length-n suffix ending at `end`
  // Appends the continuation of `match` (up to n_tokens) to `out`.
  void continuation(const LookupMatch& match, int n_tokens, std::vector<Token>& out) const;
  Draft propose_tree(int n_max);  // lookup_tree.cpp

  PromptLookupConfig config_;
  std::shared_ptr<LookupCache> cache_;
  std::vector<Token> history_;     // (n_committed)
  std::vector<uint64_t> prefix_;   // (n_committed + 1) rolling prefix hash, prefix_[0] = 0
  std::vector<uint64_t> power_;    // (lookup_max + 1) base^i
  // Per suffix length n (index n - lookup_min): hash -> most recent indexed end position, and
  // (n_committed) link from an end position to the previous one with the same hash (-1: none).
  std::vector<FlatKeyTable<int32_t>> head_;  // flat: indexing a token never allocates per entry
  std::vector<std::vector<int32_t>> prev_;
  int n_indexed_ = 0;              // n-grams ending at positions [0, n_indexed_) are indexed
  std::vector<float> last_confidence_;  // (n_nodes of the last proposal)
  LookupMatch last_match_;
  int n_flushed_ = 0;
  float p_min_ = 0.0f;
  double draft_seconds_ = 0.0;
};

}  // namespace specdec
