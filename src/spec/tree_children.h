// spec/tree_children.h — how a sampling drafter picks the children of one tree node from its q.
// The drafters use this, and so do the losslessness tests (real drafter code, not a test
// generator): the rule recorded in the Draft must match how the children were really drawn.
#pragma once

#include <vector>

#include "specdec/drafter.h"
#include "specdec/sampling.h"

namespace specdec {

class Rng;

// Requires: q non-empty, n_children >= 1 (the count is decided before any draw: acceptance is
// exact only for a child count that does not depend on the drawn values).
// Guarantees, by rule:
//   Deterministic: the n_children most probable ids of q (ties: lower id), most probable first;
//   IndependentWithReplacement: n_children independent draws from q (duplicates possible);
//   WithoutReplacement: draws from q, each from q renormalised without the earlier draws.
// Deterministic and WithoutReplacement return min(n_children, support size) ids.
// Cost: O(n_children * support).
std::vector<Token> choose_children(const SparseDist& q, int n_children, ChildRule rule, Rng& rng);

}  // namespace specdec
