// spec/acceptance.cpp — greedy and speculative-sampling acceptance over draft trees.
#include "specdec/acceptance.h"

#include <algorithm>
#include <string>

#include "specdec/error.h"
#include "specdec/rng.h"

namespace specdec {

namespace {

// A distribution under residual updates: ids ascending, double probabilities.
struct WorkDist {
  std::vector<Token> ids;     // (n_support)
  std::vector<double> probs;  // (n_support)

  static WorkDist from(const SparseDist& d) {
    WorkDist w;
    w.ids = d.ids;
    w.probs.assign(d.probs.begin(), d.probs.end());
    return w;
  }
  static WorkDist one_hot(Token id) {
    WorkDist w;
    w.ids = {id};
    w.probs = {1.0};
    return w;
  }
  double prob(Token id) const {
    auto it = std::lower_bound(ids.begin(), ids.end(), id);
    return (it == ids.end() || *it != id) ? 0.0 : probs[static_cast<size_t>(it - ids.begin())];
  }
  double total() const {
    double sum = 0.0;
    for (double p : probs) sum += p;
    return sum;
  }
  // Divides by the total; returns false (unchanged) when there is no mass.
  bool normalise() {
    const double sum = total();
    if (!(sum > 0.0)) return false;
    for (double& p : probs) p /= sum;
    return true;
  }
  void zero(Token id) {
    auto it = std::lower_bound(ids.begin(), ids.end(), id);
    if (it != ids.end() && *it == id) probs[static_cast<size_t>(it - ids.begin())] = 0.0;
  }
  // max(this - q, 0) over this support (q outside it only subtracts from zero).
  WorkDist minus_clamped(const WorkDist& q) const {
    WorkDist out = *this;
    size_t j = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      while (j < q.ids.size() && q.ids[j] < ids[i]) ++j;
      if (j < q.ids.size() && q.ids[j] == ids[i]) out.probs[i] = std::max(0.0, probs[i] - q.probs[j]);
    }
    return out;
  }
  // Inverse CDF over ids ascending. scaled: u is multiplied by the total (a proper sample of
  // the normalised distribution); unscaled is the planted UnnormalisedResidual bug, where the
  // mass missing below 1 falls on the last id of the support.
  Token draw(Rng& rng, bool scaled = true) const {
    SPECDEC_CHECK(!ids.empty(), "acceptance: sampling from an empty distribution");
    const double u = rng.uniform() * (scaled ? total() : 1.0);
    double cumulative = 0.0;
    for (size_t i = 0; i < ids.size(); ++i) {
      cumulative += probs[i];
      if (u < cumulative) return ids[i];
    }
    for (size_t i = ids.size(); i-- > 0;) {
      if (probs[i] > 0.0 || !scaled) return ids[i];
    }
    SPECDEC_CHECK(false, "acceptance: distribution without mass");
    return -1;
  }
};

// children[0] = root's children, children[i + 1] = node i's children, in index order.
std::vector<std::vector<int>> children_by_row(const Draft& draft) {
  std::vector<std::vector<int>> children(draft.tokens.size() + 1);  // (n_nodes + 1, n_children)
  for (size_t i = 0; i < draft.tokens.size(); ++i) {
    children[static_cast<size_t>(draft.parent[i] + 1)].push_back(static_cast<int>(i));
  }
  return children;
}

Token dist_argmax(const SparseDist& d) {
  SPECDEC_CHECK(!d.empty(), "greedy acceptance: empty target distribution");
  size_t best = 0;
  for (size_t i = 1; i < d.ids.size(); ++i) {
    if (d.probs[i] > d.probs[best]) best = i;  // ids ascending: ties keep the lowest id
  }
  return d.ids[best];
}

// The q a node was drawn from (one-hot at its token for deterministic nodes).
WorkDist node_q(const Draft& draft, int node) {
  const Token x = draft.tokens[static_cast<size_t>(node)];
  if (draft.rule == ChildRule::Deterministic || draft.q.empty() || draft.q[static_cast<size_t>(node)].empty()) {
    return WorkDist::one_hot(x);
  }
  return WorkDist::from(draft.q[static_cast<size_t>(node)]);
}

}  // namespace

TargetRow rows_from(std::span<const SparseDist> rows) {
  return [rows](int row) {
    SPECDEC_CHECK(row >= 0 && static_cast<size_t>(row) < rows.size(),
                  "rows_from: row " + std::to_string(row) + " of " + std::to_string(rows.size()));
    return rows[static_cast<size_t>(row)];
  };
}

Verdict accept_greedy(const Draft& draft, const TargetRow& target) {
  validate_draft(draft);
  const auto children = children_by_row(draft);
  Verdict verdict;
  int row = 0;
  while (true) {
    const Token best = dist_argmax(target(row));
    int follow = -1;
    for (int c : children[static_cast<size_t>(row)]) {
      if (draft.tokens[static_cast<size_t>(c)] == best) {
        follow = c;
        break;
      }
    }
    if (follow < 0) {
      verdict.next = best;
      return verdict;
    }
    verdict.path.push_back(follow);
    row = follow + 1;
  }
}

Verdict accept_sampling(const Draft& draft, const TargetRow& target, Rng& rng, const AcceptOptions& options) {
  validate_draft(draft);
  if (!(options.lenience > 0.0f && options.lenience <= 1.0f)) {
    throw Error("lenience " + std::to_string(options.lenience) + " is outside (0, 1]");
  }
  const bool without_replacement = draft.rule == ChildRule::WithoutReplacement;
  const auto children = children_by_row(draft);
  const double lenience = options.lenience;
  Verdict verdict;
  int row = 0;
  while (true) {
    const auto& kids = children[static_cast<size_t>(row)];
    WorkDist p = WorkDist::from(target(row));
    if (kids.empty()) {  // a leaf (or the root of an empty draft): the bonus token
      if (options.bug == PlantedBug::BonusWrongRow && row > 0) {
        const int parent = draft.parent[static_cast<size_t>(row - 1)];
        p = WorkDist::from(target(parent + 1));
      }
      verdict.next = p.draw(rng);
      return verdict;
    }
    int accepted = -1;
    bool p_unnormalised = false;
    WorkDist q_running;  // without replacement: q left after removing rejected children
    if (without_replacement) q_running = node_q(draft, kids[0]);
    for (int c : kids) {
      const Token x = draft.tokens[static_cast<size_t>(c)];
      const WorkDist q = without_replacement ? q_running : node_q(draft, c);
      const double u = rng.uniform();
      // Accept with probability min(1, p(x) / (lenience q(x))); q(x) = 0 (a q that did not
      // draw x, only under planted bugs) accepts whenever p(x) > 0.
      if (u * lenience * q.prob(x) < p.prob(x)) {
        accepted = c;
        break;
      }
      if (options.bug != PlantedBug::NoResidual) {
        WorkDist residual = p.minus_clamped(q);
        if (options.bug == PlantedBug::UnnormalisedResidual) {
          if (residual.total() > 0.0) p = residual;
          p_unnormalised = true;
        } else if (residual.normalise()) {
          p = residual;
        }  // else: no mass left (p == q up to rounding), keep p
      }
      if (without_replacement) {
        q_running.zero(x);
        if (options.bug != PlantedBug::NoQRenormalise) q_running.normalise();
      }
    }
    if (accepted < 0) {
      verdict.next = p.draw(rng, !p_unnormalised);
      return verdict;
    }
    verdict.path.push_back(accepted);
    row = accepted + 1;
  }
}

}  // namespace specdec
