// server/load_aware_k.h — the draft length K for a whole decode batch, chosen from measured
// costs at the current load.
//
// With B sequences decoding together, one iteration verifies B * (K + 1) rows in one target
// forward and yields B * E(K) tokens, E(K) = 1 + sum_{k<=K} alpha_1 ... alpha_k. On a CPU a
// forward of few rows costs about the same as one row (memory bound), so drafts are almost
// free at B = 1; as B * (K + 1) grows the forward turns compute bound and every wasted draft
// row costs real time. We pick
//     K* = argmax_K  B * E(K) / (t(B * (K + 1)) + B * K * t_draft)
// with t(M) the measured forward time of M rows (moving averages per row count, straight lines
// between them and a least-squares slope past the largest: spec/draft_length.h) and t_draft the
// measured time per draft token. K*
// drops toward 0 when the marginal draft rows stop paying. Every probe_interval iterations a
// plain (K = 0) iteration keeps t(B) measured at the current batch size. While K* = 0, no draft
// is verified and the acceptance estimates would freeze (a request that starts repeating itself
// would never be noticed): every explore_interval plain iterations one K = 1 iteration measures
// acceptance again, at a cost of B extra rows in one forward out of explore_interval.
#pragma once

#include <memory>

namespace specdec {
class DraftLengthController;
}

namespace specdec::server {

class LoadAwareK {
 public:
  explicit LoadAwareK(int probe_interval = 16, int max_rows = 2048, int explore_interval = 32);
  ~LoadAwareK();

  // K for n_seqs decoding sequences, in [0, k_max] (k_max >= 0). Cost: O(k_max).
  int choose(int n_seqs, int k_max);
  // A pure decode forward (no prefill rows) of n_rows rows took `seconds`.
  void observe_forward(int n_rows, double seconds);
  // One sequence's verified chain: n_drafted deep, n_accepted accepted.
  void observe_acceptance(int n_drafted, int n_accepted);
  // Drafters spent `seconds` proposing n_tokens tokens in one iteration.
  void observe_draft(int n_tokens, double seconds);

  int last_k() const { return last_k_; }
  // Predicted tokens per second of the whole batch at K (0: unknown). For metrics and tests.
  double predicted_rate(int n_seqs, int k) const;

 private:
  std::unique_ptr<DraftLengthController> costs_;
  int probe_interval_;
  int explore_interval_;
  int iterations_since_probe_ = 0;
  int plain_iterations_ = 0;  // consecutive iterations with K* = 0 (exploration counter)
  int last_k_ = 0;
};

}  // namespace specdec::server
