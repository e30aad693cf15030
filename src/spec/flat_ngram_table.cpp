// FlatNgramTable: exact next-token counts per context in a flat, bounded open-addressing table
// with inline candidates and a preallocated overflow pool (see ngram.h).
#include <algorithm>
#include <string>

#include "specdec/error.h"
#include "specdec/ngram.h"

namespace specdec {

namespace {

// Total order on candidates: higher count, then more recent, then lower id (as NgramTable).
bool better(const NgramTable::Next& a, const NgramTable::Next& b) {
  if (a.count != b.count) return a.count > b.count;
  if (a.last_pos != b.last_pos) return a.last_pos > b.last_pos;
  return a.token < b.token;
}

size_t checked_bound(size_t bound, const char* what) {
  if (bound == 0) throw Error(std::string("n-gram table: ") + what + " must be >= 1, got 0");
  return bound;
}

}  // namespace

FlatNgramTable::FlatNgramTable(size_t max_contexts, size_t max_pairs)
    : contexts_(checked_bound(max_contexts, "max_contexts")), max_pairs_(checked_bound(max_pairs, "max_pairs")) {}

template <typename F>
void FlatNgramTable::for_each_next(const Context& c, const std::vector<OverflowNode>& pool, F&& f) {
  for (int i = 0; i < c.n_inline; ++i) f(c.next[i]);
  for (int32_t n = c.overflow; n >= 0; n = pool[static_cast<size_t>(n)].link) f(pool[static_cast<size_t>(n)].next);
}

int32_t FlatNgramTable::new_node(const NgramTable::Next& next, int32_t link) {
  int32_t node = free_;
  if (node >= 0) {
    free_ = pool_[static_cast<size_t>(node)].link;
  } else {
    // Grows by doubling (amortised O(1)); never past max_pairs_, which add() enforces.
    if (pool_.size() == pool_.capacity()) pool_.reserve(std::min(max_pairs_, std::max<size_t>(16, 2 * pool_.size())));
    node = static_cast<int32_t>(pool_.size());
    pool_.push_back(OverflowNode{});
  }
  pool_[static_cast<size_t>(node)] = OverflowNode{next, link};
  return node;
}

void FlatNgramTable::free_node(int32_t node) {
  pool_[static_cast<size_t>(node)].link = free_;
  free_ = node;
}

bool FlatNgramTable::add(uint64_t key, Token token, uint32_t pos) {
  Context* c = contexts_.find(key);
  if (c != nullptr) {
    for (int i = 0; i < c->n_inline; ++i) {
      NgramTable::Next& n = c->next[i];
      if (n.token == token) {
        ++n.count;
        ++c->total;
        n.last_pos = std::max(n.last_pos, pos);
        return true;
      }
    }
    for (int32_t node = c->overflow; node >= 0; node = pool_[static_cast<size_t>(node)].link) {
      NgramTable::Next& n = pool_[static_cast<size_t>(node)].next;
      if (n.token == token) {
        ++n.count;
        ++c->total;
        n.last_pos = std::max(n.last_pos, pos);
        return true;
      }
    }
  }
  if (n_pairs_ >= max_pairs_) return false;  // a new pair beyond the bound
  if (c == nullptr) {
    bool inserted = false;
    c = contexts_.find_or_insert(key, &inserted);
    if (c == nullptr) return false;  // a new context beyond the bound
  }
  const NgramTable::Next fresh{token, 1, pos};
  if (c->n_inline < kInline) {
    c->next[c->n_inline++] = fresh;
  } else {
    c->overflow = new_node(fresh, c->overflow);
  }
  ++c->total;
  ++n_pairs_;
  return true;
}

void FlatNgramTable::remove(uint64_t key, Token token) {
  Context* c = contexts_.find(key);
  SPECDEC_CHECK(c != nullptr, "n-gram context to remove is absent");
  bool found = false;
  for (int i = 0; !found && i < c->n_inline; ++i) {
    NgramTable::Next& n = c->next[i];
    if (n.token != token) continue;
    found = true;
    if (--n.count > 0) break;
    // The pair goes: refill the inline slot from the overflow chain, else from the last slot.
    if (c->overflow >= 0) {
      const int32_t node = c->overflow;
      n = pool_[static_cast<size_t>(node)].next;
      c->overflow = pool_[static_cast<size_t>(node)].link;
      free_node(node);
    } else {
      n = c->next[--c->n_inline];
    }
    --n_pairs_;
  }
  for (int32_t* link = &c->overflow; !found && *link >= 0; link = &pool_[static_cast<size_t>(*link)].link) {
    OverflowNode& node = pool_[static_cast<size_t>(*link)];
    if (node.next.token != token) continue;
    found = true;
    if (--node.next.count == 0) {  // unlink the node (*link may become -1: stop here)
      const int32_t gone = *link;
      *link = node.link;
      free_node(gone);
      --n_pairs_;
    }
    break;
  }
  SPECDEC_CHECK(found, "n-gram to remove is absent: token " + std::to_string(token));
  if (--c->total == 0) contexts_.erase(key);
}

NgramPrediction FlatNgramTable::best(uint64_t key) const {
  NgramPrediction out;
  const Context* c = contexts_.find(key);
  if (c == nullptr) return out;
  const NgramTable::Next* top = &c->next[0];
  for_each_next(*c, pool_, [&](const NgramTable::Next& n) {
    if (better(n, *top)) top = &n;
  });
  out.token = top->token;
  out.count = top->count;
  out.total = c->total;
  return out;
}

std::vector<NgramPrediction> FlatNgramTable::top(uint64_t key, int n_max) const {
  std::vector<NgramPrediction> out;
  const Context* c = contexts_.find(key);
  if (c == nullptr || n_max <= 0) return out;
  std::vector<NgramTable::Next> order;  // (n_distinct_next) candidates, best first
  for_each_next(*c, pool_, [&](const NgramTable::Next& n) { order.push_back(n); });
  std::sort(order.begin(), order.end(), better);
  for (size_t i = 0; i < order.size() && out.size() < static_cast<size_t>(n_max); ++i) {
    NgramPrediction p;
    p.token = order[i].token;
    p.count = order[i].count;
    p.total = c->total;
    out.push_back(p);
  }
  return out;
}

void FlatNgramTable::clear() {
  contexts_.clear();
  pool_.clear();  // keeps its capacity
  free_ = -1;
  n_pairs_ = 0;
}

}  // namespace specdec
