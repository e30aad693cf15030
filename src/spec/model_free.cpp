// Parsing --spec and building the model-free drafters.
#include "specdec/model_free.h"

#include <algorithm>

#include "specdec/error.h"

namespace specdec {

SpecMethod parse_spec_method(std::string_view text) {
  if (text == "none") return SpecMethod::None;
  if (text == "draft") return SpecMethod::Draft;
  if (text == "ngram") return SpecMethod::Ngram;
  if (text == "lookup") return SpecMethod::Lookup;
  if (text == "hybrid") return SpecMethod::Hybrid;
  if (text == "tree") return SpecMethod::Tree;
  if (text == "medusa") return SpecMethod::Medusa;
  if (text == "eagle") return SpecMethod::Eagle;
  throw Error("unknown speculation method '" + std::string(text) +
              "' (expected none, draft, ngram, lookup, hybrid, tree, medusa or eagle)");
}

const char* spec_method_name(SpecMethod method) {
  switch (method) {
    case SpecMethod::None: return "none";
    case SpecMethod::Draft: return "draft";
    case SpecMethod::Ngram: return "ngram";
    case SpecMethod::Lookup: return "lookup";
    case SpecMethod::Hybrid: return "hybrid";
    case SpecMethod::Tree: return "tree";
    case SpecMethod::Medusa: return "medusa";
    case SpecMethod::Eagle: return "eagle";
  }
  return "?";
}

std::unique_ptr<ConfidentDrafter> make_model_free_drafter(SpecMethod method, const ModelFreeOptions& options,
                                                          std::shared_ptr<LookupCache> cache) {
  switch (method) {
    case SpecMethod::Ngram: {
      NgramConfig c;
      c.max_order = options.ngram_order;
      c.min_order = std::min(2, options.ngram_order);
      c.window = options.ngram_window;
      c.min_confidence = options.min_confidence;
      c.tree_width = options.tree_width;
      c.tree_depth = options.tree_depth;
      return std::make_unique<NgramDrafter>(c, std::move(cache));
    }
    case SpecMethod::Lookup:
    case SpecMethod::Tree: {
      PromptLookupConfig c;
      c.lookup_min = options.lookup_min;
      c.lookup_max = options.lookup_max;
      c.tree_width = method == SpecMethod::Tree ? std::max(2, options.tree_width) : options.tree_width;
      c.tree_depth = options.tree_depth;
      return std::make_unique<PromptLookupDrafter>(c, std::move(cache));
    }
    default:
      throw Error(std::string("speculation method '") + spec_method_name(method) + "' is not a model-free drafter");
  }
}

LookupCacheFile::LookupCacheFile(std::string path, int n_vocab, uint64_t vocab_fingerprint,
                                 const ModelFreeOptions& options, std::string* warning)
    : path_(std::move(path)) {
  LookupCacheConfig c;
  c.max_order = std::max(2, options.ngram_order);
  cache_ = std::make_shared<LookupCache>(LookupCache::load_or_empty(path_, n_vocab, vocab_fingerprint, c, warning));
}

}  // namespace specdec
