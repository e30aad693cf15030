// NgramTable and NgramDrafter: multi-order n-gram counts over a sliding window.
#include <algorithm>
#include <string>

#include "specdec/error.h"
#include "specdec/lookup_cache.h"
#include "specdec/ngram.h"
#include "specdec/timer.h"

namespace specdec {

namespace {

// splitmix64 finalizer: a bijective 64-bit mixer.
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// Total order on candidates: higher count, then more recent, then lower id.
bool better(const NgramTable::Next& a, const NgramTable::Next& b) {
  if (a.count != b.count) return a.count > b.count;
  if (a.last_pos != b.last_pos) return a.last_pos > b.last_pos;
  return a.token < b.token;
}

void check_orders(int min_order, int max_order, const char* what) {
  if (min_order < 2 || max_order > 16 || min_order > max_order) {
    throw Error(std::string(what) + ": n-gram orders must satisfy 2 <= min_order <= max_order <= 16, got " +
                std::to_string(min_order) + ".." + std::to_string(max_order));
  }
}

}  // namespace

uint64_t ngram_key(std::span<const Token> context) {
  uint64_t h = mix64(0x6e6772616dULL + context.size());  // "ngram" + context length
  for (Token t : context) h = mix64(h ^ static_cast<uint32_t>(t));
  return h;
}

void NgramTable::add(uint64_t key, Token token, uint32_t count, uint32_t pos, int max_next) {
  Entry& entry = entries_[key];
  entry.total += count;
  for (Next& n : entry.next) {
    if (n.token == token) {
      n.count += count;
      n.last_pos = std::max(n.last_pos, pos);
      return;
    }
  }
  if (max_next > 0 && static_cast<int>(entry.next.size()) >= max_next) {
    // Replace the worst candidate (the last one in `better` order).
    auto worst = std::min_element(entry.next.begin(), entry.next.end(),
                                  [](const Next& a, const Next& b) { return better(b, a); });
    entry.total -= worst->count;
    *worst = Next{token, count, pos};
    return;
  }
  entry.next.push_back(Next{token, count, pos});
}

void NgramTable::remove(uint64_t key, Token token) {
  auto it = entries_.find(key);
  SPECDEC_CHECK(it != entries_.end(), "n-gram context to remove is absent");
  Entry& entry = it->second;
  auto n = std::find_if(entry.next.begin(), entry.next.end(), [&](const Next& x) { return x.token == token; });
  SPECDEC_CHECK(n != entry.next.end() && n->count > 0, "n-gram to remove is absent: token " + std::to_string(token));
  --n->count;
  --entry.total;
  if (n->count == 0) {
    *n = entry.next.back();
    entry.next.pop_back();
  }
  if (entry.total == 0) entries_.erase(it);
}

NgramPrediction NgramTable::best(uint64_t key) const {
  NgramPrediction out;
  auto it = entries_.find(key);
  if (it == entries_.end() || it->second.next.empty()) return out;
  const Next* top = &it->second.next.front();
  for (const Next& n : it->second.next) {
    if (better(n, *top)) top = &n;
  }
  out.token = top->token;
  out.count = top->count;
  out.total = it->second.total;
  return out;
}

std::vector<NgramPrediction> NgramTable::top(uint64_t key, int n_max) const {
  std::vector<NgramPrediction> out;
  auto it = entries_.find(key);
  if (it == entries_.end() || n_max <= 0) return out;
  std::vector<const Next*> order;  // (n_distinct_next) candidates, best first
  for (const Next& n : it->second.next) order.push_back(&n);
  std::sort(order.begin(), order.end(), [](const Next* a, const Next* b) { return better(*a, *b); });
  for (size_t i = 0; i < order.size() && out.size() < static_cast<size_t>(n_max); ++i) {
    NgramPrediction p;
    p.token = order[i]->token;
    p.count = order[i]->count;
    p.total = it->second.total;
    out.push_back(p);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

NgramDrafter::NgramDrafter(NgramConfig config, std::shared_ptr<LookupCache> cache)
    : config_(config), cache_(std::move(cache)) {
  check_orders(config_.min_order, config_.max_order, "ngram drafter");
  if (config_.window < 1) throw Error("ngram drafter: window must be >= 1, got " + std::to_string(config_.window));
  if (config_.tree_width < 1 || config_.tree_depth < 0) {
    throw Error("ngram drafter: tree width " + std::to_string(config_.tree_width) + " must be >= 1 and depth " +
                std::to_string(config_.tree_depth) + " >= 0");
  }
  // The window holds at most `window` n-grams per order: as many contexts and pairs at most.
  const size_t bound = static_cast<size_t>(config_.window);
  tables_.assign(static_cast<size_t>(config_.max_order) + 1, FlatNgramTable(bound, bound));
}

size_t NgramDrafter::table_size(int order) const {
  if (order < config_.min_order || order > config_.max_order) return 0;
  return tables_[static_cast<size_t>(order)].size();
}

void NgramDrafter::add_ngrams_ending_at(int pos) {
  for (int order = config_.min_order; order <= config_.max_order; ++order) {
    int start = pos - (order - 1);
    if (start < 0) break;
    std::span<const Token> ctx(history_.data() + start, static_cast<size_t>(order - 1));
    const bool added = tables_[static_cast<size_t>(order)].add(ngram_key(ctx), history_[static_cast<size_t>(pos)],
                                                               static_cast<uint32_t>(pos));
    SPECDEC_CHECK(added, "n-gram window table of order " + std::to_string(order) + " is over its bound");
  }
}

void NgramDrafter::remove_ngrams_ending_at(int pos) {
  for (int order = config_.min_order; order <= config_.max_order; ++order) {
    int start = pos - (order - 1);
    if (start < 0) break;
    std::span<const Token> ctx(history_.data() + start, static_cast<size_t>(order - 1));
    tables_[static_cast<size_t>(order)].remove(ngram_key(ctx), history_[static_cast<size_t>(pos)]);
  }
}

void NgramDrafter::append(Token token) {
  history_.push_back(token);
  const int pos = static_cast<int>(history_.size()) - 1;
  // The n-grams ending at pos - window leave the window first, so the tables never hold more
  // than `window` n-grams per order (their bound). Removing the oldest occurrence never changes
  // an entry's last_pos unless its count drops to zero (then the entry goes).
  const int leaving = pos - config_.window;
  if (leaving >= 0) remove_ngrams_ending_at(leaving);
  add_ngrams_ending_at(pos);
}

void NgramDrafter::rebuild_window() {
  for (auto& table : tables_) table.clear();
  const int n = static_cast<int>(history_.size());
  for (int pos = std::max(0, n - config_.window); pos < n; ++pos) add_ngrams_ending_at(pos);
}

void NgramDrafter::begin(std::span<const Token> prompt) {
  flush_to_cache();
  history_.clear();
  n_flushed_ = 0;
  for (auto& table : tables_) table.clear();
  last_confidence_.clear();
  history_.reserve(prompt.size());
  for (Token t : prompt) append(t);
}

void NgramDrafter::rollback(int n_tokens) {
  if (n_tokens < 0) throw Error("ngram drafter: rollback to a negative length " + std::to_string(n_tokens));
  if (n_tokens >= static_cast<int>(history_.size())) return;
  history_.resize(static_cast<size_t>(n_tokens));
  n_flushed_ = std::min(n_flushed_, n_tokens);
  rebuild_window();  // exact: equal to a drafter that saw only the kept tokens
}

size_t committed_prefix_length(std::span<const Token> known, std::span<const Token> context) {
  const size_t n = std::min(known.size(), context.size());
  const size_t n_tail = std::min<size_t>(n, 64);
  if (std::equal(known.begin() + static_cast<ptrdiff_t>(n - n_tail), known.begin() + static_cast<ptrdiff_t>(n),
                 context.begin() + static_cast<ptrdiff_t>(n - n_tail))) {
    return n;
  }
  return static_cast<size_t>(std::mismatch(known.begin(), known.begin() + static_cast<ptrdiff_t>(n), context.begin()).first -
                             known.begin());
}

void NgramDrafter::sync(std::span<const Token> context) {
  const size_t n_common = committed_prefix_length(history_, context);
  rollback(static_cast<int>(n_common));
  for (size_t i = n_common; i < context.size(); ++i) append(context[i]);
}

void NgramDrafter::accept(const Draft& draft, const Verdict& verdict) {
  for (int32_t node : verdict.path) {
    SPECDEC_CHECK(node >= 0 && node < draft.size(), "verdict path node " + std::to_string(node) +
                                                        " outside a draft of " + std::to_string(draft.size()));
    append(draft.tokens[static_cast<size_t>(node)]);
  }
  if (verdict.next >= 0) append(verdict.next);
}

NgramPrediction NgramDrafter::predict(std::span<const Token> tail) const {
  // Longest order first; at each order the window (this text) before the cache (earlier runs).
  const int top = std::max(config_.max_order, cache_ ? cache_->config().max_order : 0);
  const int bottom = std::min(config_.min_order, cache_ ? cache_->config().min_order : 16);
  for (int order = top; order >= bottom; --order) {
    const size_t n_ctx = static_cast<size_t>(order - 1);
    if (order >= config_.min_order && order <= config_.max_order && tail.size() >= n_ctx) {
      NgramPrediction p = tables_[static_cast<size_t>(order)].best(ngram_key(tail.last(n_ctx)));
      if (p.token >= 0 && p.total >= config_.min_count) {
        p.order = order;
        return p;
      }
    }
    if (cache_) {
      NgramPrediction p = cache_->predict_order(tail, order);
      if (p.token >= 0) return p;
    }
  }
  return {};
}

Draft NgramDrafter::propose(std::span<const Token> context, int n_max, const SamplingParams& sampling) {
  (void)sampling;  // deterministic drafts: acceptance compares with the target's own choice
  const double t0 = now_seconds();
  sync(context);
  Draft draft;
  draft.rule = ChildRule::Deterministic;
  last_confidence_.clear();
  if (n_max > 0 && config_.tree_width > 1) {
    draft = propose_tree(n_max);
  } else if (n_max > 0) {
    const int top = std::max(config_.max_order, cache_ ? cache_->config().max_order : 0);
    const size_t n_tail = std::min(history_.size(), static_cast<size_t>(top - 1));
    std::span<const Token> tail(history_.data() + history_.size() - n_tail, n_tail);
    chain_predictions(tail, n_max, std::max(config_.min_confidence, p_min_),
                      [this](std::span<const Token> t) { return predict(t); }, draft.tokens, last_confidence_);
    for (int i = 0; i < draft.size(); ++i) draft.parent.push_back(i - 1);
  }
  draft_seconds_ += now_seconds() - t0;
  return draft;
}

void NgramDrafter::flush_to_cache() {
  if (!cache_ || n_flushed_ >= static_cast<int>(history_.size())) return;
  cache_->add_sequence(history_, static_cast<size_t>(n_flushed_));
  n_flushed_ = static_cast<int>(history_.size());
}

}  // namespace specdec
