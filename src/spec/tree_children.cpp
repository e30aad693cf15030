// spec/tree_children.cpp — see tree_children.h.
#include "spec/tree_children.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "specdec/error.h"
#include "specdec/rng.h"

namespace specdec {

std::vector<Token> choose_children(const SparseDist& q, int n_children, ChildRule rule, Rng& rng) {
  SPECDEC_CHECK(!q.empty(), "choose_children: empty q");
  SPECDEC_CHECK(n_children >= 1, "choose_children: n_children " + std::to_string(n_children));
  std::vector<Token> out;
  const size_t n_support = q.ids.size();
  switch (rule) {
    case ChildRule::Deterministic: {
      std::vector<size_t> order(n_support);  // (n_support) indices into q, most probable first
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return q.probs[a] > q.probs[b]; });
      for (size_t i = 0; i < order.size() && out.size() < static_cast<size_t>(n_children); ++i) {
        if (q.probs[order[i]] > 0.0f) out.push_back(q.ids[order[i]]);
      }
      break;
    }
    case ChildRule::IndependentWithReplacement:
      for (int i = 0; i < n_children; ++i) out.push_back(sample(q, rng));
      break;
    case ChildRule::WithoutReplacement: {
      SparseDist left = q;  // q without the ids drawn so far (sample() renormalises)
      for (int i = 0; i < n_children; ++i) {
        bool any = false;
        for (float p : left.probs) any = any || p > 0.0f;
        if (!any) break;
        const Token x = sample(left, rng);
        out.push_back(x);
        auto it = std::lower_bound(left.ids.begin(), left.ids.end(), x);
        left.probs[static_cast<size_t>(it - left.ids.begin())] = 0.0f;
      }
      break;
    }
  }
  return out;
}

}  // namespace specdec
