// HybridDrafter: lookup proposal when long and confident, the fallback drafter otherwise.
#include "specdec/hybrid_drafter.h"

#include "specdec/error.h"

namespace specdec {

HybridDrafter::HybridDrafter(std::unique_ptr<ConfidentDrafter> lookup, std::unique_ptr<Drafter> fallback,
                             HybridPolicy policy)
    : lookup_(std::move(lookup)), fallback_(std::move(fallback)), policy_(policy) {
  if (!lookup_) throw Error("hybrid drafter: the lookup drafter is missing");
  if (!fallback_) throw Error("hybrid drafter: the fallback drafter is missing");
}

std::string HybridDrafter::name() const { return "hybrid(" + lookup_->name() + "+" + fallback_->name() + ")"; }

void HybridDrafter::begin(std::span<const Token> prompt) {
  lookup_->begin(prompt);
  fallback_->begin(prompt);
  last_from_lookup_ = false;
}

Draft HybridDrafter::propose(std::span<const Token> context, int n_max, const SamplingParams& sampling) {
  Draft draft = lookup_->propose(context, n_max, sampling);
  const auto& confidence = lookup_->last_confidence();
  last_from_lookup_ = n_max > 0 && draft.size() >= policy_.min_length && !confidence.empty() &&
                      confidence.front() >= policy_.min_confidence;
  if (last_from_lookup_) {
    ++n_lookup_steps_;
    return draft;
  }
  ++n_fallback_steps_;
  return fallback_->propose(context, n_max, sampling);
}

void HybridDrafter::accept(const Draft& draft, const Verdict& verdict) {
  lookup_->accept(draft, verdict);
  if (!last_from_lookup_) fallback_->accept(draft, verdict);
}

void HybridDrafter::rollback(int n_tokens) {
  lookup_->rollback(n_tokens);
  fallback_->rollback(n_tokens);
}

void HybridDrafter::set_p_min(float p_min) {
  lookup_->set_p_min(p_min);
  fallback_->set_p_min(p_min);
}

double HybridDrafter::draft_seconds() const { return lookup_->draft_seconds() + fallback_->draft_seconds(); }

}  // namespace specdec
