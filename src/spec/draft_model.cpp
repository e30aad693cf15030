// spec/draft_model.cpp — DraftModelDrafter: cache bookkeeping and chain drafting.
// Tree drafting is in draft_model_tree.cpp.
#include <algorithm>
#include <limits>
#include <string>

#include "specdec/draft_model.h"
#include "specdec/error.h"
#include "specdec/timer.h"

namespace specdec {

namespace {

constexpr int kChunk = 256;                            // rows per catch-up forward
constexpr uint64_t kDraftStream = 0xD8AF7E5EED5EEDULL;  // draft Rng = seed ^ this

float max_prob(const SparseDist& d) {
  float best = 0.0f;
  for (float p : d.probs) best = std::max(best, p);
  return best;
}

// The planted TransformOnPOnly bug records q as the plain softmax of the logits.
SamplingParams untransformed() {
  SamplingParams raw;
  raw.temperature = 1.0f;
  raw.top_k = 0;
  raw.top_p = 1.0f;
  raw.min_p = 0.0f;
  return raw;
}

}  // namespace

DraftModelDrafter::DraftModelDrafter(Transformer& draft_model, const DraftModelOptions& options)
    : model_(draft_model), options_(options), cache_(draft_model.new_cache(options.n_ctx)) {
  if (options_.tree_nodes < 0) throw Error("tree_nodes " + std::to_string(options_.tree_nodes) + " must be >= 0");
  if (options_.tree_nodes > 0 && (options_.tree_width < 1 || options_.tree_depth < 1)) {
    throw Error("tree width " + std::to_string(options_.tree_width) + " and depth " +
                std::to_string(options_.tree_depth) + " must be >= 1");
  }
  if (options_.n_vocab_target < 0) throw Error("n_vocab_target " + std::to_string(options_.n_vocab_target));
}

void DraftModelDrafter::forward_chain(std::span<const Token> tokens, bool want_last, std::vector<float>* last_logits) {
  KvCache* caches[] = {&cache_};
  for (size_t start = 0; start < tokens.size(); start += kChunk) {
    const size_t end = std::min(tokens.size(), start + kChunk);
    const int pos0 = cache_.size();
    batch_.clear();
    for (size_t i = start; i < end; ++i) {
      const bool logits = want_last && i + 1 == tokens.size();
      batch_.add(tokens[i], pos0 + static_cast<int32_t>(i - start), i == start ? -1 : static_cast<int32_t>(i - start - 1),
                 0, logits);
    }
    model_.forward(batch_, caches, logits_);
    forwarded_rows_ += static_cast<int64_t>(end - start);
    cached_.insert(cached_.end(), tokens.begin() + static_cast<std::ptrdiff_t>(start),
                   tokens.begin() + static_cast<std::ptrdiff_t>(end));
  }
  if (want_last) {
    SPECDEC_CHECK(logits_.n_rows() == 1, "draft forward returned no logits");
    last_logits->assign(logits_.row(0), logits_.row(0) + logits_.n_vocab);
  }
}

std::vector<float> DraftModelDrafter::sync(std::span<const Token> context) {
  SPECDEC_CHECK(!context.empty(), "draft sync with an empty context");
  drop_tree_rows();
  // Reuse the longest cached prefix; the last context token is always forwarded for its logits.
  const size_t n_keep = std::min(common_prefix_length(cached_, context), context.size() - 1);
  cache_.truncate(static_cast<int>(n_keep));
  cached_.resize(n_keep);
  std::vector<float> logits;  // (n_vocab_draft)
  forward_chain(context.subspan(n_keep), true, &logits);
  return logits;
}

std::span<const float> DraftModelDrafter::masked(std::vector<float>& logits) const {
  if (options_.n_vocab_target > 0 && static_cast<size_t>(options_.n_vocab_target) < logits.size()) {
    std::fill(logits.begin() + options_.n_vocab_target, logits.end(), -std::numeric_limits<float>::infinity());
  }
  return logits;
}

void DraftModelDrafter::begin(std::span<const Token> prompt) {
  if (prompt.empty()) throw Error("draft model: empty prompt");
  seeded_ = false;
  n_forwarded_ = 0;
  drop_tree_rows();
  const size_t n_keep = std::min(common_prefix_length(cached_, prompt), prompt.size() - 1);
  cache_.truncate(static_cast<int>(n_keep));
  cached_.resize(n_keep);
  const size_t n_prefill = std::min(prompt.size() - 1, static_cast<size_t>(cache_.capacity()));
  if (n_prefill > n_keep) forward_chain(prompt.subspan(n_keep, n_prefill - n_keep), false, nullptr);
}

Draft DraftModelDrafter::propose(std::span<const Token> context, int n_max, const SamplingParams& sampling) {
  if (!seeded_) {
    rng_ = Rng(sampling.seed ^ kDraftStream);
    seeded_ = true;
  }
  const double t0 = now_seconds();
  propose_base_ = static_cast<int>(context.size());
  n_forwarded_ = 0;
  drop_tree_rows();
  // Every drafted node needs a draft position: context + (n_max - 1) forwarded tokens.
  n_max = std::min(n_max, cache_.capacity() - static_cast<int>(context.size()) + 1);
  Draft draft;
  if (n_max > 0 && !context.empty()) {
    draft = options_.tree_nodes > 0 ? propose_tree(context, n_max, sampling) : propose_chain(context, n_max, sampling);
  }
  draft_seconds_ += now_seconds() - t0;
  return draft;
}

Draft DraftModelDrafter::propose_chain(std::span<const Token> context, int n_max, const SamplingParams& sampling) {
  Draft draft;
  draft.rule = ChildRule::IndependentWithReplacement;  // a chain of single draws from q
  std::vector<float> logits = sync(context);           // (n_vocab_draft) after the last token
  std::vector<Token> history(context.begin(), context.end());
  std::vector<SparseDist> q_after;                     // QRecomputedAfter only: q one row late
  for (int i = 0; i < n_max; ++i) {
    SparseDist q = make_distribution(masked(logits), sampling, history);
    if (p_min_ > 0.0f && max_prob(q) < p_min_) break;
    const Token x = sample(q, rng_);
    if (options_.bug == PlantedBug::TransformOnPOnly) q = make_distribution(masked(logits), untransformed(), history);
    if (options_.bug == PlantedBug::QRecomputedAfter && i > 0) q_after.push_back(q);
    draft.add(x, i - 1, std::move(q));
    history.push_back(x);
    const bool last = i + 1 == n_max;
    if (!last || options_.bug == PlantedBug::QRecomputedAfter) {
      const Token one[] = {x};
      forward_chain(one, true, &logits);
      ++n_forwarded_;
    }
  }
  if (options_.bug == PlantedBug::QRecomputedAfter && draft.size() > 0) {
    if (n_forwarded_ == draft.size()) q_after.push_back(make_distribution(masked(logits), sampling, history));
    for (size_t i = 0; i < q_after.size() && i < draft.q.size(); ++i) draft.q[i] = q_after[i];
  }
  return draft;
}

void DraftModelDrafter::accept(const Draft& draft, const Verdict& verdict) {
  if (!tree_slot_.empty()) {
    accept_tree(draft, verdict);  // see draft_model_tree.cpp
    return;
  }
  // Chains: the cache holds the context plus n_forwarded_ draft tokens; keep the accepted ones.
  const int n_keep = propose_base_ + std::min(verdict.n_accepted(), n_forwarded_);
  if (n_keep < cache_.size()) {
    cache_.truncate(n_keep);
    cached_.resize(static_cast<size_t>(n_keep));
  }
  n_forwarded_ = 0;
}

void DraftModelDrafter::rollback(int n_tokens) {
  drop_tree_rows();
  if (n_tokens < cache_.size()) {
    cache_.truncate(std::max(0, n_tokens));
    cached_.resize(static_cast<size_t>(cache_.size()));
  }
}

}  // namespace specdec
