// server/load_aware_k.cpp — see load_aware_k.h.
#include "server/load_aware_k.h"

#include "spec/draft_length.h"

namespace specdec::server {

LoadAwareK::LoadAwareK(int probe_interval, int max_rows, int explore_interval)
    : costs_(std::make_unique<DraftLengthController>(64, max_rows)),
      probe_interval_(probe_interval),
      explore_interval_(explore_interval) {}

LoadAwareK::~LoadAwareK() = default;

double LoadAwareK::predicted_rate(int n_seqs, int k) const {
  // verify_cost and c_draft are both in units of one 1-row forward, so the ratio is in tokens
  // per 1-row forward time; only the argmax matters.
  const double cost = n_seqs * k * costs_->c_draft() + costs_->verify_cost(n_seqs * (k + 1));
  return cost > 0.0 ? n_seqs * costs_->expected_tokens(k) / cost : 0.0;
}

int LoadAwareK::choose(int n_seqs, int k_max) {
  if (n_seqs < 1 || k_max <= 0) return last_k_ = 0;
  if (++iterations_since_probe_ >= probe_interval_) {
    iterations_since_probe_ = 0;
    return last_k_ = 0;  // a plain iteration measures t(n_seqs)
  }
  int best_k = 0;
  double best_rate = -1.0;
  for (int k = 0; k <= k_max; ++k) {
    const double rate = predicted_rate(n_seqs, k);
    if (rate > best_rate * (1.0 + 1e-9)) {
      best_rate = rate;
      best_k = k;
    }
  }
  if (best_k > 0) {
    plain_iterations_ = 0;
  } else if (++plain_iterations_ >= explore_interval_) {
    plain_iterations_ = 0;
    best_k = 1;  // keep the acceptance estimate fresh (see the header)
  }
  return last_k_ = best_k;
}

void LoadAwareK::observe_forward(int n_rows, double seconds) { costs_->observe_verify(n_rows, seconds); }

void LoadAwareK::observe_acceptance(int n_drafted, int n_accepted) {
  costs_->observe_acceptance(n_drafted, n_accepted);
}

void LoadAwareK::observe_draft(int n_tokens, double seconds) { costs_->observe_draft(n_tokens, seconds); }

}  // namespace specdec::server
