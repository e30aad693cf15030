// specdec/acceptance.h — deciding which draft nodes the target accepts: pure functions of
// (draft, target distributions, random numbers), unit-tested for losslessness by chi-square.
//
// Verify rows: the target forward runs over [last committed token, node 0, node 1, ...], so
// row 0 holds the target's distribution for the children of the root and row i + 1 the one
// after draft node i. Each row's distribution is make_distribution(logits, params, history)
// with history = committed tokens + the tokens on the path to that node (penalties see earlier
// draft tokens as history), exactly as the draft computed q.
//
// Rules (issue 3 and issue 9), walking down from the root; at each node the children are tried
// in index order against the current target distribution p (initially the row's):
//   greedy: follow the child whose token is argmax p; if none, emit argmax p.
//   Deterministic children (no q / one-hot q): accept x with probability p(x); on rejection
//     p <- norm(p with x zeroed).
//   IndependentWithReplacement (SpecInfer; also every sampled chain): accept x with
//     probability min(1, p(x) / q(x)); on rejection p <- norm(max(p - q, 0)).
//   WithoutReplacement: as above, then also q <- norm(q with x zeroed) for the next child.
// No child accepted: emit a sample from the final p (when the residual has no mass left,
// which only rounding can cause, the last p with mass is used). A leaf was accepted: emit
// the bonus token, a sample from p at the leaf. With one child per node this is exactly
// Leviathan et al. 2023, Algorithm 1.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "specdec/drafter.h"
#include "specdec/sampling.h"

namespace specdec {

class Rng;

// INTERNAL TESTING HOOK. Deliberate bugs that the losslessness tests must detect; kept as
// permanent tests so a statistic that stops seeing them fails the suite. Never set outside
// tests: every value but None makes the output distribution wrong.
enum class PlantedBug : uint8_t {
  None,
  NoResidual,            // after a rejection, sample from (or keep trying children against) p unchanged
  UnnormalisedResidual,  // residual max(p - q, 0) sampled by inverse CDF without renormalising
  BonusWrongRow,         // bonus token drawn from the leaf's parent row instead of the leaf's row
  QRecomputedAfter,      // drafter: q of node i recorded from the draft row after node i (one row late)
  TransformOnPOnly,      // drafter: tokens drawn from the transformed q, but q recorded without the transform
  NoQRenormalise,        // without replacement: q after removing a rejected child is not renormalised
  DeterministicAsSampled,  // drafter (Medusa): top-k children recorded with q and a sampling rule
};

struct AcceptOptions {
  // Leviathan et al. appendix A.5: accept x with probability min(1, p(x) / (lenience * q(x))).
  // 1 = exact (the default); values in (0, 1) accept more and are LOSSY (reported as such).
  float lenience = 1.0f;
  PlantedBug bug = PlantedBug::None;  // testing hook, see above
};

// The target distribution of verify row `row` in [0, draft.size()]; called at most once per
// row, and only for rows on the walked path (so callers can compute rows lazily).
using TargetRow = std::function<SparseDist(int row)>;

// Requires: draft well formed (parent[i] < i, q empty or one per node).
// Guarantees: verdict.path is a root-down path of node indices, verdict.next the target's token
// after it. No randomness. Cost: one TargetRow call per visited row + O(n_nodes).
Verdict accept_greedy(const Draft& draft, const TargetRow& target);

// Speculative sampling with draft.rule (see above). Requires: q[i] is the distribution node i
// was really drawn from (empty for deterministic nodes). Guarantees: the emitted tokens
// (path tokens, then next) are distributed exactly as sampling them one by one from the
// target rows (lenience 1, bug None). Randomness: one rng.uniform() per tried child plus one
// per emitted sample. Cost: O(support) per tried child.
Verdict accept_sampling(const Draft& draft, const TargetRow& target, Rng& rng,
                        const AcceptOptions& options = {});

// Convenience for tests and callers holding every row: rows = (draft.size() + 1) distributions.
TargetRow rows_from(std::span<const SparseDist> rows);

// Tree helpers. depth(root children) = 1. Requires a well-formed draft (Error otherwise).
std::vector<int32_t> node_depths(const Draft& draft);
// Tokens from the root down to `node` inclusive (empty for node -1).
std::vector<Token> path_tokens(const Draft& draft, int node);
// Throws Error naming the offending node when parent/q arrays are inconsistent.
void validate_draft(const Draft& draft);

}  // namespace specdec
