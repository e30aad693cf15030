// specdec/hybrid_drafter.h — a model-free drafter (lookup / n-gram) in front of another drafter
// (usually the draft model): each step the lookup's proposal is used when it is long and
// confident enough, the other drafter's otherwise.
#pragma once

#include <cstdint>
#include <memory>

#include "specdec/ngram.h"

namespace specdec {

struct HybridPolicy {
  int min_length = 2;            // the lookup proposal must have at least this many tokens
  float min_confidence = 0.75f;  // ... and its first node at least this confidence
};

class HybridDrafter : public Drafter {
 public:
  // Takes ownership of both. Throws Error when either is null.
  HybridDrafter(std::unique_ptr<ConfidentDrafter> lookup, std::unique_ptr<Drafter> fallback,
                HybridPolicy policy = {});

  std::string name() const override;
  // Both drafters start the sequence.
  void begin(std::span<const Token> prompt) override;
  // Asks the lookup drafter first (cheap); if its proposal passes the policy it is returned,
  // otherwise the fallback drafter proposes. Cost: one lookup plus, when it fails, one fallback
  // proposal.
  Draft propose(std::span<const Token> context, int n_max, const SamplingParams& sampling) override;
  // State consistency: the lookup drafter learns every verdict (it accepts any draft). The
  // fallback drafter gets accept() for its own proposals only; after a step where the lookup's
  // proposal was used it holds nothing speculative and catches up on the newly committed tokens
  // from the `context` of its next propose() (which every Drafter must accept: it is the
  // committed sequence).
  void accept(const Draft& draft, const Verdict& verdict) override;
  void rollback(int n_tokens) override;
  double draft_seconds() const override;
  void set_p_min(float p_min) override;
  // Forwards to the lookup drafter (see ConfidentDrafter::flush_to_cache).
  void flush_to_cache() { lookup_->flush_to_cache(); }

  // Steps whose draft came from each source (for benchmarks: which policy wins).
  int64_t n_lookup_steps() const { return n_lookup_steps_; }
  int64_t n_fallback_steps() const { return n_fallback_steps_; }
  bool last_from_lookup() const { return last_from_lookup_; }
  const HybridPolicy& policy() const { return policy_; }
  ConfidentDrafter& lookup() { return *lookup_; }
  Drafter& fallback() { return *fallback_; }

 private:
  std::unique_ptr<ConfidentDrafter> lookup_;
  std::unique_ptr<Drafter> fallback_;
  HybridPolicy policy_;
  bool last_from_lookup_ = false;
  int64_t n_lookup_steps_ = 0;
  int64_t n_fallback_steps_ = 0;
};

}  // namespace specdec
