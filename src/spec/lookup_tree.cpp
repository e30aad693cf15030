// PromptLookupDrafter::propose_tree: the continuations of several earlier occurrences of the
// committed suffix, merged into a trie (issue 9). Branches are inserted in find_all() order
// (longest suffix, then most recent), so the first branch is exactly the chain propose() would
// give; later branches add only the nodes where they differ. Deterministic children.
#include <algorithm>

#include "specdec/prompt_lookup.h"

namespace specdec {

Draft PromptLookupDrafter::propose_tree(int n_max) {
  Draft draft;
  draft.rule = ChildRule::Deterministic;
  const std::vector<LookupMatch> matches = find_all(config_.tree_width);
  last_match_ = matches.empty() ? LookupMatch{} : matches.front();
  const int branch_depth = config_.tree_depth > 0 ? std::min(config_.tree_depth, n_max) : n_max;
  const int n_matches = static_cast<int>(matches.size());
  for (const LookupMatch& match : matches) {
    // The first (best) branch leaves at least one node for each other occurrence.
    const int depth = &match == &matches.front() ? std::min(branch_depth, std::max(1, n_max - (n_matches - 1)))
                                                 : branch_depth;
    const float confidence = float(match.match_length) / float(match.match_length + 1);
    if (confidence < p_min_) continue;
    std::vector<Token> branch;  // (depth) the tokens that followed this occurrence
    continuation(match, depth, branch);
    int32_t at = -1;  // walk down the existing trie, then add the rest of the branch
    for (Token t : branch) {
      int32_t child = -1;
      for (int i = 0; i < draft.size() && child < 0; ++i) {
        if (draft.parent[static_cast<size_t>(i)] == at && draft.tokens[static_cast<size_t>(i)] == t) child = i;
      }
      if (child < 0) {
        if (draft.size() >= n_max) break;
        child = draft.add(t, at);
        last_confidence_.push_back(confidence);
      }
      at = child;
    }
    if (draft.size() >= n_max) break;
  }
  draft.q.clear();  // deterministic draft: no q
  return draft;
}

}  // namespace specdec
