// spec/draft_length.h — the adaptive draft length (issue 3): online estimates of the per-position
// acceptance rates alpha_k and of the two measured costs, and the K that maximises expected
// tokens per unit of time:
//
//   E[tokens](K) = 1 + sum_{k=1..K} alpha_1 * ... * alpha_k
//   cost(K)      = K * c_draft + verify_cost(K + 1)          (in target single-row steps)
//   K*           = argmax_{K in [k_min, k_max]} E[tokens](K) / cost(K)
//
// K = 0 (a plain step) has rate 1 / verify_cost(1) = 1, so drafting happens only when its
// expected tokens per unit of time beat plain decoding.
//
// c_draft = time of one draft token / time of a 1-row target forward; verify_cost(M) = time of
// an M-row target forward / time of a 1-row forward. Both come from measurements (moving
// averages). For row counts never measured, verify_cost interpolates between the measured counts
// on either side and, past the largest, follows a least-squares line through the multi-row
// counts (M >= 2: a 1-row forward runs a decode's kernels, not a verify's); with only one
// multi-row count measured it is taken as flat beyond it (optimistic: the first draft that the
// acceptance evidence justifies then measures the real cost).
//
// Acceptance: alpha_1 starts at the prior (set_prior: pessimistic for drafters whose acceptance
// is observed for free at plain steps, see speculative.cpp) and every later position is shrunk
// toward the previous one. Observations decay geometrically (kAcceptDecay) at every verified
// draft, at positions it reached or not, so the estimates follow a change of regime (a repeated
// passage starting or ending) within a few steps, and a position that K no longer reaches
// drifts back to the previous one's estimate (and is tried again if that pays).
#pragma once

#include <vector>

namespace specdec {

class DraftLengthController {
 public:
  // max_positions: acceptance is tracked for draft positions 1..max_positions; max_rows: verify
  // timings for forwards of 1..max_rows rows (larger forwards are not recorded).
  explicit DraftLengthController(int max_positions = 64, int max_rows = 256);

  // One verified chain: positions 1..n_accepted were accepted and, when n_accepted < n_drafted,
  // position n_accepted + 1 was rejected. Positions past it carry no information.
  void observe_acceptance(int n_drafted, int n_accepted);
  // A target forward over n_rows rows took `seconds`.
  void observe_verify(int n_rows, double seconds);
  // The drafter spent `seconds` proposing n_tokens tokens (n_tokens 0 counts as 1). Timings are
  // robust to preemption: the first kDraftWarmup are combined by their minimum, later ones (and
  // verify timings) are clipped to kMaxOutlier times the current estimate.
  void observe_draft(int n_tokens, double seconds);
  // alpha_1 before any observation (default 0.5), in [0, 1].
  void set_prior(double alpha_1);
  int n_prior_sets() const { return n_prior_sets_; }

  // Estimated P(position k accepted | positions < k accepted), k >= 1. Smoothed toward the
  // previous position's estimate (and the prior for k = 1) with a weight of kPriorWeight
  // observations.
  double alpha(int position) const;
  double expected_tokens(int k) const;
  // Decayed count of the verified drafts that reached position k (the weight of alpha(k)'s own
  // evidence against its shrinkage target).
  double evidence(int position) const;
  double c_draft() const;
  bool has_draft_timing() const { return has_draft_timing_; }
  int n_draft_observations() const { return n_draft_obs_; }
  static constexpr int kDraftWarmup = 3;        // the first draft timings are combined by their minimum
  // t(n_rows) / t(1): measured EMAs where present, otherwise interpolated or extrapolated as
  // above, 1 when nothing is known.
  double verify_cost(int n_rows) const;
  // Seconds of a 1-row target forward (measured, or from the line), 0 when unknown.
  double single_row_seconds() const;
  bool has_single_row_measurement() const { return n_obs_[1] > 0; }

  // The K in [k_min, k_max] maximising E[tokens](K) / cost(K) (ties: the smaller K).
  // Requires 0 <= k_min <= k_max. Cost: O(k_max).
  int choose(int k_min, int k_max) const;
  // Whether some K in [1, k_max] would beat plain decoding if every draft token were accepted,
  // at the measured costs: (K + 1) / (K * c_draft + verify_cost(K + 1)) > 1. False means the
  // drafter is too slow to ever pay (a draft model about as large as the target), so exploring
  // it is pure cost. Cost: O(k_max).
  bool drafting_can_pay(int k_max) const;

 private:
  double row_seconds(int n_rows) const;  // measured or fitted t(n_rows); 0 when unknown
  void refit();

  static constexpr double kTimeDecay = 0.98;    // weight of the past in the timing averages
  static constexpr double kAcceptDecay = 0.93;  // weight of the past in the acceptance counts
  static constexpr double kPriorWeight = 1.0;   // pseudo-observations of the prior / previous position
  double prior_alpha_ = 0.5;
  int n_prior_sets_ = 0;
  std::vector<double> tried_;     // (max_positions + 1) decayed counts of steps reaching position k
  std::vector<double> accepted_;  // (max_positions + 1) decayed counts of acceptances at k
  std::vector<double> t_rows_;    // (max_rows + 1) EMA seconds of an n-row forward
  std::vector<long> n_obs_;       // (max_rows + 1) observations of each row count
  std::vector<int> measured_;     // (n_distinct measured row counts) ascending: refit() is O(this)
  std::vector<double> capped_;    // (n_distinct) t of measured_[i], capped by those of larger counts
  double fit_a_ = 0.0, fit_b_ = 0.0;  // t(M) ~ fit_a_ + fit_b_ * M
  bool fit_valid_ = false;
  static constexpr double kMaxOutlier = 3.0;  // timing samples are clipped to this times the estimate
  static constexpr double kFastDown = 0.5;    // least weight of a verify timing below the estimate
  double draft_token_seconds_ = 0.0;  // EMA seconds per draft token
  int n_draft_obs_ = 0;
  bool has_draft_timing_ = false;
};

}  // namespace specdec
