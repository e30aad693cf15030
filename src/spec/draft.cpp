// spec/draft.cpp — the Draft token tree (drafter.h) and its tree helpers (acceptance.h).
#include <string>

#include "specdec/acceptance.h"
#include "specdec/drafter.h"
#include "specdec/error.h"

namespace specdec {

bool Draft::is_chain() const {
  for (int i = 0; i < size(); ++i) {
    if (parent[static_cast<size_t>(i)] != i - 1) return false;
  }
  return true;
}

void Draft::clear() {
  tokens.clear();
  parent.clear();
  q.clear();
  rule = ChildRule::Deterministic;
}

int Draft::add(Token token, int32_t parent_index, SparseDist node_q) {
  SPECDEC_CHECK(parent_index >= -1 && parent_index < size(),
                "Draft::add: parent " + std::to_string(parent_index) + " of node " + std::to_string(size()));
  tokens.push_back(token);
  parent.push_back(parent_index);
  q.push_back(std::move(node_q));
  return size() - 1;
}

void validate_draft(const Draft& draft) {
  const size_t n = draft.tokens.size();
  if (draft.parent.size() != n) {
    throw Error("draft has " + std::to_string(n) + " tokens but " + std::to_string(draft.parent.size()) +
                " parents");
  }
  if (!draft.q.empty() && draft.q.size() != n) {
    throw Error("draft has " + std::to_string(n) + " tokens but " + std::to_string(draft.q.size()) +
                " q distributions");
  }
  for (size_t i = 0; i < n; ++i) {
    const int32_t p = draft.parent[i];
    if (p < -1 || p >= static_cast<int32_t>(i)) {
      throw Error("draft node " + std::to_string(i) + " has parent " + std::to_string(p) +
                  " (must be -1 or an earlier node)");
    }
    if (draft.tokens[i] < 0) {
      throw Error("draft node " + std::to_string(i) + " has token id " + std::to_string(draft.tokens[i]));
    }
  }
}

std::vector<int32_t> node_depths(const Draft& draft) {
  validate_draft(draft);
  std::vector<int32_t> depth(draft.tokens.size());  // (n_nodes)
  for (size_t i = 0; i < depth.size(); ++i) {
    const int32_t p = draft.parent[i];
    depth[i] = p < 0 ? 1 : depth[static_cast<size_t>(p)] + 1;
  }
  return depth;
}

std::vector<Token> path_tokens(const Draft& draft, int node) {
  std::vector<Token> path;
  for (int i = node; i >= 0; i = draft.parent[static_cast<size_t>(i)]) {
    path.push_back(draft.tokens[static_cast<size_t>(i)]);
  }
  return {path.rbegin(), path.rend()};
}

}  // namespace specdec
