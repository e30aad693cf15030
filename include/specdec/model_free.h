// specdec/model_free.h — choosing and building the model-free drafters from user options
// (--spec ngram|lookup|draft|hybrid|tree|none, --lookup-min, --lookup-max, --ngram-order,
// --lookup-cache, --tree-*), so every frontend wires them the same way.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "specdec/hybrid_drafter.h"
#include "specdec/lookup_cache.h"
#include "specdec/ngram.h"
#include "specdec/prompt_lookup.h"

namespace specdec {

// Tree: token trees (issue 9): the draft model's tree when a draft model is given, otherwise
// the prompt-lookup tree (continuations of several earlier occurrences).
// Medusa / Eagle: self-speculation heads trained for the target (--heads FILE, docs/HEADS.md).
enum class SpecMethod { None, Draft, Ngram, Lookup, Hybrid, Tree, Medusa, Eagle };

// "none" | "draft" | "ngram" | "lookup" | "hybrid" | "tree" | "medusa" | "eagle"; Error naming the value otherwise.
SpecMethod parse_spec_method(std::string_view text);
const char* spec_method_name(SpecMethod method);
// The default of --spec: draft when a draft model is given, otherwise lookup.
inline SpecMethod default_spec_method(bool have_draft_model) {
  return have_draft_model ? SpecMethod::Draft : SpecMethod::Lookup;
}

struct ModelFreeOptions {
  int lookup_min = 2;      // --lookup-min
  int lookup_max = 4;      // --lookup-max
  int ngram_order = 4;     // --ngram-order: the longest n-gram (orders 2..ngram_order)
  int ngram_window = 512;  // tokens of history the n-gram tables cover
  float min_confidence = 0.0f;  // n-gram chains stop below this count-based confidence
  HybridPolicy hybrid;     // when the lookup's proposal wins over the draft model's
  int tree_width = 1;      // > 1: the n-gram / lookup drafters propose trees (see their configs)
  int tree_depth = 0;      // deepest tree level (0: the node budget)
};

// Builds the drafter for Ngram, Lookup or Tree (a lookup tree, with tree_width >= 2) (Error for
// other methods or invalid options, naming them). `cache` may be null. Cost: O(1).
std::unique_ptr<ConfidentDrafter> make_model_free_drafter(SpecMethod method, const ModelFreeOptions& options,
                                                          std::shared_ptr<LookupCache> cache = nullptr);

// The persistent cache behind --lookup-cache FILE: loads it (a missing file starts empty; a
// corrupt or foreign one starts empty and sets *warning), and save() writes it back atomically.
// Call drafter flush_to_cache() (or begin() of a next sequence) before save().
class LookupCacheFile {
 public:
  LookupCacheFile(std::string path, int n_vocab, uint64_t vocab_fingerprint, const ModelFreeOptions& options,
                  std::string* warning);
  const std::shared_ptr<LookupCache>& cache() const { return cache_; }
  const std::string& path() const { return path_; }
  // Throws Error when the file cannot be written.
  void save() const { cache_->save(path_); }

 private:
  std::string path_;
  std::shared_ptr<LookupCache> cache_;
};

}  // namespace specdec
