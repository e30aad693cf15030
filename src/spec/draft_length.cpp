// spec/draft_length.cpp — see draft_length.h.
#include "spec/draft_length.h"

#include <algorithm>
#include <string>

#include "specdec/error.h"

namespace specdec {

DraftLengthController::DraftLengthController(int max_positions, int max_rows)
    : tried_(static_cast<size_t>(max_positions) + 1, 0.0),
      accepted_(static_cast<size_t>(max_positions) + 1, 0.0),
      t_rows_(static_cast<size_t>(max_rows) + 1, 0.0),
      n_obs_(static_cast<size_t>(max_rows) + 1, 0) {
  SPECDEC_CHECK(max_positions >= 1 && max_rows >= 2, "DraftLengthController: bad sizes");
}

void DraftLengthController::observe_acceptance(int n_drafted, int n_accepted) {
  SPECDEC_CHECK(n_accepted >= 0 && n_accepted <= n_drafted,
                "observe_acceptance: " + std::to_string(n_accepted) + " of " + std::to_string(n_drafted));
  if (n_drafted == 0) return;
  const int last = std::min(n_accepted + (n_accepted < n_drafted ? 1 : 0), static_cast<int>(tried_.size()) - 1);
  // Every position's evidence decays, tried or not: a position no longer reached (K shrank)
  // drifts back to its shrinkage target, the previous position's estimate. Before, one early
  // rejection at position 2 held alpha(2) at half of alpha(1) for good once K = 1 was chosen,
  // since K = 1 never tried position 2 again (the demo pair drafted 1 token per step at
  // acceptance 0.96, 0.85x plain decoding; K = 3 gave 1.2-1.7x).
  for (size_t k = 1; k < tried_.size(); ++k) {
    const bool reached = static_cast<int>(k) <= last;
    tried_[k] = tried_[k] * kAcceptDecay + (reached ? 1.0 : 0.0);
    accepted_[k] = accepted_[k] * kAcceptDecay + (reached && static_cast<int>(k) <= n_accepted ? 1.0 : 0.0);
  }
}

void DraftLengthController::observe_verify(int n_rows, double seconds) {
  if (n_rows < 1 || static_cast<size_t>(n_rows) >= t_rows_.size() || !(seconds > 0.0)) return;
  double& t = t_rows_[static_cast<size_t>(n_rows)];
  long& n = n_obs_[static_cast<size_t>(n_rows)];
  // On a loaded machine a forward is sometimes preempted: samples above kMaxOutlier times the
  // current estimate (this row count's, or the line's for a first sample) are clipped to it.
  const double reference = n > 0 ? t : (fit_valid_ ? row_seconds(n_rows) : 0.0);
  if (reference > 0.0) seconds = std::min(seconds, kMaxOutlier * reference);
  // A plain average for the first observations, then an exponential moving average. Preemption
  // only ever adds time, so a sample below the estimate is trusted more (weight >= kFastDown):
  // an inflated estimate (a preempted forward, a busy start) comes down within a few samples.
  double weight = std::max(1.0 - kTimeDecay, 1.0 / static_cast<double>(n + 1));
  if (n > 0 && seconds < t) weight = std::max(weight, kFastDown);
  t = n == 0 ? seconds : t + weight * (seconds - t);
  if (n == 0) measured_.insert(std::upper_bound(measured_.begin(), measured_.end(), n_rows), n_rows);
  ++n;
  refit();
}

void DraftLengthController::observe_draft(int n_tokens, double seconds) {
  if (!(seconds >= 0.0)) return;
  double per_token = seconds / std::max(1, n_tokens);
  if (n_draft_obs_ < kDraftWarmup) {
    // The first proposals decide whether shadow drafts pay: their minimum ignores preemptions.
    draft_token_seconds_ = n_draft_obs_ == 0 ? per_token : std::min(draft_token_seconds_, per_token);
  } else {
    per_token = std::min(per_token, kMaxOutlier * draft_token_seconds_);
    draft_token_seconds_ += 0.1 * (per_token - draft_token_seconds_);
  }
  ++n_draft_obs_;
  has_draft_timing_ = true;
}

void DraftLengthController::set_prior(double alpha_1) {
  SPECDEC_CHECK(alpha_1 >= 0.0 && alpha_1 <= 1.0, "set_prior: alpha " + std::to_string(alpha_1));
  prior_alpha_ = alpha_1;
  ++n_prior_sets_;
}

void DraftLengthController::refit() {
  // Least squares t = a + b * M, each measured count weighted by min(count, 20), over the
  // multi-row counts (M >= 2); flat through the only one, or through t(1) when none was measured.
  // A 1-row forward runs other kernels (a decode's) than a verify's, and on a cache-resident
  // model it cost as much as 0.6 of the slope of the rows after it: a line through M = 1 and 2
  // put c(4) at 2.9 where 2.5 was measured (the demo pair on a Zen 4 VM). O(measured counts).
  const auto fit_over = [&](int from, double& a, double& b) {
    double sw = 0, sm = 0, st = 0, smm = 0, smt = 0;
    int n_distinct = 0;
    for (const int measured : measured_) {
      if (measured < from) continue;
      const size_t m = static_cast<size_t>(measured);
      const double w = static_cast<double>(std::min<long>(n_obs_[m], 20));
      const double x = static_cast<double>(m);
      sw += w;
      sm += w * x;
      st += w * t_rows_[m];
      smm += w * x * x;
      smt += w * x * t_rows_[m];
      ++n_distinct;
    }
    if (n_distinct == 0) return 0;
    const double denom = sw * smm - sm * sm;
    if (n_distinct == 1 || denom <= 0.0) {
      a = st / sw;  // flat: the only measured count
      b = 0.0;
    } else {
      b = std::max(0.0, (sw * smt - sm * st) / denom);
      a = (st - b * sm) / sw;
    }
    return n_distinct;
  };
  fit_valid_ = fit_over(2, fit_a_, fit_b_) > 0 || fit_over(1, fit_a_, fit_b_) > 0;
  // More rows never cost less: each measured count's estimate is capped by those of the larger
  // counts. A stale, inflated t(2) (a preempted forward, then drafts of other lengths only)
  // otherwise outlived the measurements around it.
  capped_.resize(measured_.size());
  double least = 0.0;
  for (size_t i = measured_.size(); i-- > 0;) {
    const double t = t_rows_[static_cast<size_t>(measured_[i])];
    least = i + 1 == measured_.size() ? t : std::min(least, t);
    capped_[i] = least;
  }
}

double DraftLengthController::row_seconds(int n_rows) const {
  if (n_rows < 1 || !fit_valid_) return 0.0;
  // A measured count: its estimate, capped (refit). Between two measured counts: the straight
  // line between them (measured curves bend, so this follows them closer than one line through
  // all). Past the largest: from it on, at the fitted slope (0, optimistic, until two multi-row
  // counts were measured: the first draft long enough to pay at that cost then measures the
  // real one). Below the smallest (1 unmeasured): the line.
  const auto above = std::upper_bound(measured_.begin(), measured_.end(), n_rows);
  const auto capped = [&](std::vector<int>::const_iterator it) {
    return capped_[static_cast<size_t>(it - measured_.begin())];
  };
  if (above != measured_.begin() && *(above - 1) == n_rows) return capped(above - 1);
  if (above == measured_.end()) return capped(above - 1) + fit_b_ * (n_rows - measured_.back());
  if (above != measured_.begin()) {
    const int lo = *(above - 1), hi = *above;
    const double t_lo = capped(above - 1), t_hi = capped(above);
    return t_lo + (t_hi - t_lo) * (n_rows - lo) / (hi - lo);
  }
  return std::max(1e-12, std::min(capped(above), fit_a_ + fit_b_ * n_rows));
}

double DraftLengthController::single_row_seconds() const { return row_seconds(1); }

double DraftLengthController::verify_cost(int n_rows) const {
  const double t1 = row_seconds(1);
  if (!(t1 > 0.0)) return 1.0;
  return row_seconds(n_rows) / t1;
}

double DraftLengthController::c_draft() const {
  const double t1 = row_seconds(1);
  if (!has_draft_timing_ || !(t1 > 0.0)) return 0.0;
  return draft_token_seconds_ / t1;
}

double DraftLengthController::alpha(int position) const {
  SPECDEC_CHECK(position >= 1, "alpha: position " + std::to_string(position));
  double estimate = prior_alpha_;
  const int last = std::min(position, static_cast<int>(tried_.size()) - 1);
  for (int k = 1; k <= last; ++k) {
    estimate = (accepted_[static_cast<size_t>(k)] + kPriorWeight * estimate) / (tried_[static_cast<size_t>(k)] + kPriorWeight);
  }
  return estimate;
}

double DraftLengthController::evidence(int position) const {
  SPECDEC_CHECK(position >= 1, "evidence: position " + std::to_string(position));
  return static_cast<size_t>(position) < tried_.size() ? tried_[static_cast<size_t>(position)] : 0.0;
}

double DraftLengthController::expected_tokens(int k) const {
  double total = 1.0, run = 1.0;
  for (int i = 1; i <= k; ++i) {
    run *= alpha(i);
    total += run;
  }
  return total;
}

int DraftLengthController::choose(int k_min, int k_max) const {
  SPECDEC_CHECK(0 <= k_min && k_min <= k_max,
                "choose: k_min " + std::to_string(k_min) + " k_max " + std::to_string(k_max));
  const double c = c_draft();
  int best_k = k_min;
  double best_rate = -1.0;
  double expected = 1.0, run = 1.0;
  for (int k = 0; k <= k_max; ++k) {
    if (k > 0) {
      run *= alpha(k);
      expected += run;
    }
    if (k < k_min) continue;
    const double rate = expected / (k * c + verify_cost(k + 1));
    if (rate > best_rate * (1.0 + 1e-12)) {
      best_rate = rate;
      best_k = k;
    }
  }
  return best_k;
}

bool DraftLengthController::drafting_can_pay(int k_max) const {
  const double c = c_draft();
  for (int k = 1; k <= k_max; ++k) {
    if (static_cast<double>(k + 1) > k * c + verify_cost(k + 1)) return true;
  }
  return false;
}

}  // namespace specdec
