// specdec/lookup_cache.h — persistent n-gram statistics (--lookup-cache FILE).
//
// Repeated workloads (the same codebase, the same documents) draft well from the first token
// when the n-gram counts of earlier runs are kept in a file. The file is tied to a vocabulary:
// its header carries the vocabulary size and a fingerprint of the token texts.
//
// File format, version 1 (all integers little-endian):
//   magic    8 bytes  "SDNGRAM\0"
//   version  u32      1
//   n_vocab  u32
//   vocab_fingerprint u64   (vocab_fingerprint of the token texts)
//   min_order u32, max_order u32
//   n_entries u64
//   n_entries times: key u64 (ngram_key of the context), n_next u32, n_next times (token i32, count u32)
//   checksum u64     FNV-1a 64 of every byte before it
// Entries are sorted by key and next tokens by id, so equal statistics give identical files.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "specdec/ngram.h"

namespace specdec {

class Tokenizer;

// 64-bit fingerprint of a vocabulary (its size and every token's text). Cost: O(total text).
uint64_t vocab_fingerprint(std::span<const std::string> token_texts);
uint64_t vocab_fingerprint(const Tokenizer& tokenizer);

// FNV-1a 64 of bytes (the file checksum).
uint64_t fnv1a64(const uint8_t* data, size_t size);

struct LookupCacheConfig {
  int min_order = 2;
  int max_order = 4;
  size_t max_contexts = 1 << 18;   // pruned (rarest contexts first) beyond this many contexts
  int max_next = 16;                // distinct next tokens kept per context
  uint32_t min_count = 2;           // an order answers only if its context was seen this often
};

class LookupCache {
 public:
  // Empty statistics for a vocabulary. Throws Error for orders outside [2, 16] or min > max.
  LookupCache(int n_vocab, uint64_t vocab_fingerprint, LookupCacheConfig config = {});

  // Reads `path`. Throws Error naming the file and the problem (bad magic, version, vocabulary
  // size or fingerprint mismatch, truncation, checksum, token id out of range...). Never reads
  // outside the file, never allocates more than the file size justifies.
  static LookupCache load(const std::string& path, int n_vocab, uint64_t vocab_fingerprint,
                          LookupCacheConfig config = {});
  // The CLI's behaviour: a missing file gives empty statistics silently (first run); a corrupt or
  // foreign file gives empty statistics and a warning in *warning (never throws for bad content).
  static LookupCache load_or_empty(const std::string& path, int n_vocab, uint64_t vocab_fingerprint,
                                   LookupCacheConfig config, std::string* warning);
  // Writes the file atomically: to `path`.tmp.<pid>, then rename over `path`. Throws Error when
  // the file cannot be written (the old file, if any, is left untouched).
  void save(const std::string& path) const;

  // Adds the n-grams of every order ending at positions [first, tokens.size()) of `tokens`
  // (those with a full context inside `tokens`). Tokens outside [0, n_vocab) are skipped.
  // Prunes when over max_contexts. Cost: O((tokens.size() - first) * n_orders).
  void add_sequence(std::span<const Token> tokens, size_t first = 0);
  // Prediction after `tail` (longest order first, contexts seen at least min_count times).
  NgramPrediction predict(std::span<const Token> tail) const;
  // Prediction of one order only (token -1 when the order is outside the cache's range, the
  // tail too short or the context seen fewer than min_count times).
  NgramPrediction predict_order(std::span<const Token> tail, int order) const;

  int n_vocab() const { return n_vocab_; }
  uint64_t fingerprint() const { return fingerprint_; }
  const LookupCacheConfig& config() const { return config_; }
  size_t n_contexts() const { return table_.size(); }
  const NgramTable& table() const { return table_; }

 private:
  void prune();

  int n_vocab_;
  uint64_t fingerprint_;
  LookupCacheConfig config_;
  NgramTable table_;   // keys of all orders (the key hashes the context length too)
};

}  // namespace specdec
