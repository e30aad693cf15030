// Engine construction: models, tokenizer, drafter selection, decoders.
#include "specdec/engine.h"

#include <algorithm>
#include <cstdio>

#include "specdec/draft_model.h"
#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/heads_drafter.h"
#include "specdec/hybrid_drafter.h"
#include "specdec/lookup_cache.h"

namespace specdec {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::Length: return "length";
    case FinishReason::Stop: return "stop";
    case FinishReason::ContextFull: return "context_full";
    case FinishReason::Cancelled: return "cancelled";
  }
  return "?";
}

Engine::Engine(const EngineOptions& options) : options_(options) {
  if (options.model_path.empty()) throw Error("no model given (-m MODEL.gguf)");
  ModelOptions model_options;
  model_options.n_threads = options.n_threads;
  model_options.kv_type = options.kv_type;
  model_options.repack_weights = options.repack_weights;
  target_ = Transformer::load(options.model_path, model_options);
  tokenizer_ = Tokenizer::from_gguf(target_->gguf());

  const int n_ctx_model = target_->config().n_ctx_train;
  if (options.n_ctx < 0) throw Error("context length -c " + std::to_string(options.n_ctx) + " must be >= 0");
  if (options.n_ctx > n_ctx_model)
    throw Error("context length -c " + std::to_string(options.n_ctx) + " exceeds the model's " +
                std::to_string(n_ctx_model) + " (" + options.model_path + ")");
  n_ctx_ = options.n_ctx > 0 ? options.n_ctx : n_ctx_model;

  method_ = options.method.value_or(default_spec_method(!options.draft_path.empty()));
  // Token trees: --spec tree (the draft model's tree with -md, else the lookup tree), or
  // --tree-nodes N with any drafter. The node budget is the decoder's draft_max.
  const bool tree = method_ == SpecMethod::Tree || options.tree_nodes > 0;
  const int tree_nodes = options.tree_nodes > 0 ? options.tree_nodes : options.spec.draft_max;
  if (options.tree_width < 0 || options.tree_depth < 0)
    throw Error("--tree-width " + std::to_string(options.tree_width) + " and --tree-depth " +
                std::to_string(options.tree_depth) + " must be >= 0 (width 0: the drafters' defaults; depth 0: the node budget)");
  if (!(options.tree_rank_temperature >= 0.0f))
    throw Error("--tree-rank-temp " + std::to_string(options.tree_rank_temperature) + " must be >= 0 (0: the drafter's default)");
  const bool needs_draft = method_ == SpecMethod::Draft || method_ == SpecMethod::Hybrid ||
                           (method_ == SpecMethod::Tree && !options.draft_path.empty());
  if (needs_draft && options.draft_path.empty())
    throw Error(std::string("--spec ") + spec_method_name(method_) + " needs a draft model (-md DRAFT.gguf)");

  if (!options.lookup_cache_path.empty()) {
    std::string warning;
    lookup_cache_ = std::make_unique<LookupCacheFile>(options.lookup_cache_path, tokenizer_->n_vocab(),
                                                      vocab_fingerprint(*tokenizer_), options.model_free, &warning);
    if (!warning.empty()) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  }
  auto cache = lookup_cache_ ? lookup_cache_->cache() : nullptr;

  const bool needs_heads = method_ == SpecMethod::Medusa || method_ == SpecMethod::Eagle;
  if (needs_heads && options.heads_path.empty())
    throw Error(std::string("--spec ") + spec_method_name(method_) + " needs a heads file (--heads FILE.gguf)");
  if (method_ == SpecMethod::Medusa) medusa_ = MedusaHeads::load(options.heads_path, *target_);
  if (method_ == SpecMethod::Eagle) eagle_ = EagleLayer::load(options.heads_path, *target_);

  if (needs_draft) {
    draft_model_ = Transformer::load(options.draft_path, model_options);
    auto draft_tokenizer = Tokenizer::from_gguf(draft_model_->gguf());
    check_vocab_compatible(VocabView::of(*tokenizer_), VocabView::of(*draft_tokenizer));
  }
  drafter_ = make_drafter(method_, cache);
  if (drafter_) drafter_->set_p_min(options.spec.draft_p_min);
  SpecConfig spec = options.spec;
  if (tree) spec.draft_max = std::max(spec.draft_min, tree_nodes);
  options_.spec = spec;
  spec_decoder_ = std::make_unique<SpeculativeDecoder>(*target_, drafter_.get(), spec, n_ctx_);
}

std::unique_ptr<Drafter> Engine::make_drafter(SpecMethod method, std::shared_ptr<LookupCache> cache) {
  const EngineOptions& options = options_;
  const bool tree = method == SpecMethod::Tree || options.tree_nodes > 0;
  const int tree_nodes = options.tree_nodes > 0 ? options.tree_nodes : options.spec.draft_max;
  ModelFreeOptions model_free = options.model_free;
  if (tree) {
    model_free.tree_width = std::max(2, options.tree_width);  // 0: 2
    model_free.tree_depth = options.tree_depth;
  }
  auto draft_model_drafter = [&]() -> std::unique_ptr<Drafter> {
    if (!draft_model_)
      throw Error(std::string("speculative method ") + spec_method_name(method) +
                  " needs a draft model (-md DRAFT.gguf)");
    DraftModelOptions draft_options;
    draft_options.n_ctx = std::min(n_ctx_, draft_model_->config().n_ctx_train);
    draft_options.n_vocab_target = target_->config().n_vocab;
    draft_options.tree_nodes = tree ? tree_nodes : 0;
    if (options.tree_width > 0) draft_options.tree_width = options.tree_width;
    draft_options.tree_depth = options.tree_depth;
    if (options.tree_rank_temperature > 0.0f) draft_options.tree_rank_temperature = options.tree_rank_temperature;
    if (tree) draft_options.tree_rule = ChildRule::WithoutReplacement;
    return std::make_unique<DraftModelDrafter>(*draft_model_, draft_options);
  };
  std::unique_ptr<Drafter> drafter;
  switch (method) {
    case SpecMethod::None: return nullptr;
    case SpecMethod::Draft: drafter = draft_model_drafter(); break;
    case SpecMethod::Medusa:
      if (!medusa_) throw Error("speculative method medusa needs Medusa heads (--spec medusa --heads FILE.gguf)");
      drafter = std::make_unique<MedusaDrafter>(*target_, *medusa_);
      break;
    case SpecMethod::Eagle: {
      if (!eagle_) throw Error("speculative method eagle needs an EAGLE layer (--spec eagle --heads FILE.gguf)");
      EagleOptions eagle_options;
      eagle_options.n_ctx = std::min(n_ctx_, eagle_->config().n_ctx_train);
      eagle_options.tree_nodes = options.tree_nodes;
      if (options.tree_width > 0) eagle_options.tree_width = eagle_options.sampled_tree_width = options.tree_width;
      eagle_options.tree_depth = options.tree_depth;
      if (options.tree_rank_temperature > 0.0f) eagle_options.tree_rank_temperature = options.tree_rank_temperature;
      drafter = std::make_unique<EagleDrafter>(*target_, *eagle_, eagle_options);
      break;
    }
    case SpecMethod::Tree:
      if (draft_model_) {
        drafter = draft_model_drafter();
        break;
      }
      [[fallthrough]];
    case SpecMethod::Ngram:
    case SpecMethod::Lookup: drafter = make_model_free_drafter(method, model_free, cache); break;
    case SpecMethod::Hybrid:
      drafter = std::make_unique<HybridDrafter>(make_model_free_drafter(SpecMethod::Lookup, model_free, cache),
                                                draft_model_drafter(), options.model_free.hybrid);
      break;
  }
  return drafter;
}

Engine::~Engine() = default;

SpeculativeDecoder& Engine::decoder_for(bool speculative) {
  if (speculative || !drafter_) return *spec_decoder_;
  if (!plain_decoder_) plain_decoder_ = std::make_unique<SpeculativeDecoder>(*target_, nullptr, options_.spec, n_ctx_);
  return *plain_decoder_;
}

void Engine::save_lookup_cache() {
  if (!lookup_cache_) return;
  if (auto* confident = dynamic_cast<ConfidentDrafter*>(drafter_.get())) confident->flush_to_cache();
  if (auto* hybrid = dynamic_cast<HybridDrafter*>(drafter_.get())) hybrid->flush_to_cache();
  lookup_cache_->save();
}

}  // namespace specdec
