// PromptLookupDrafter: most recent earlier occurrence of the committed suffix, via rolling-hash
// chains updated incrementally.
#include "specdec/prompt_lookup.h"

#include <algorithm>
#include <string>

#include "specdec/error.h"
#include "specdec/lookup_cache.h"
#include "specdec/timer.h"

namespace specdec {

namespace {

constexpr uint64_t kBase = 0x100000001b3ULL;  // odd: invertible mod 2^64

uint64_t symbol(Token t) {
  // Spread token ids over 64 bits so small ids do not collide arithmetically.
  uint64_t x = static_cast<uint32_t>(t) + 0x9e3779b97f4a7c15ULL;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ULL;
  return x ^ (x >> 29);
}

}  // namespace

PromptLookupDrafter::PromptLookupDrafter(PromptLookupConfig config, std::shared_ptr<LookupCache> cache)
    : config_(config), cache_(std::move(cache)) {
  if (config_.lookup_min < 1 || config_.lookup_max > 64 || config_.lookup_min > config_.lookup_max) {
    throw Error("prompt lookup: need 1 <= lookup_min <= lookup_max <= 64, got " + std::to_string(config_.lookup_min) +
                ".." + std::to_string(config_.lookup_max));
  }
  if (config_.tree_width < 1 || config_.tree_depth < 0) {
    throw Error("prompt lookup: tree width " + std::to_string(config_.tree_width) + " must be >= 1 and depth " +
                std::to_string(config_.tree_depth) + " >= 0");
  }
  if (config_.max_chain_steps < 1) {
    throw Error("prompt lookup: max_chain_steps must be >= 1, got " + std::to_string(config_.max_chain_steps));
  }
  power_.assign(static_cast<size_t>(config_.lookup_max) + 1, 1);
  for (size_t i = 1; i < power_.size(); ++i) power_[i] = power_[i - 1] * kBase;
  const size_t n_sizes = static_cast<size_t>(config_.lookup_max - config_.lookup_min + 1);
  head_.resize(n_sizes);
  prev_.resize(n_sizes);
  prefix_.assign(1, 0);
}

uint64_t PromptLookupDrafter::range_hash(int first, int n) const {
  return prefix_[static_cast<size_t>(first + n)] - prefix_[static_cast<size_t>(first)] * power_[static_cast<size_t>(n)];
}

void PromptLookupDrafter::index_ngrams_ending_at(int end) {
  for (int n = config_.lookup_min; n <= config_.lookup_max; ++n) {
    auto& prev = prev_[static_cast<size_t>(n - config_.lookup_min)];
    SPECDEC_CHECK(static_cast<int>(prev.size()) == end, "lookup index out of step at position " + std::to_string(end));
    const int first = end - n + 1;
    if (first < 0) {
      prev.push_back(-1);
      continue;
    }
    bool inserted = false;
    int32_t* head = head_[static_cast<size_t>(n - config_.lookup_min)].find_or_insert(range_hash(first, n), &inserted);
    prev.push_back(inserted ? -1 : *head);
    *head = end;
  }
}

void PromptLookupDrafter::unindex_ngrams_ending_at(int end) {
  for (int n = config_.lookup_min; n <= config_.lookup_max; ++n) {
    auto& prev = prev_[static_cast<size_t>(n - config_.lookup_min)];
    SPECDEC_CHECK(static_cast<int>(prev.size()) == end + 1, "lookup index out of step at position " + std::to_string(end));
    const int first = end - n + 1;
    const int32_t before = prev.back();
    prev.pop_back();
    if (first < 0) continue;
    auto& heads = head_[static_cast<size_t>(n - config_.lookup_min)];
    const uint64_t hash = range_hash(first, n);
    int32_t* head = heads.find(hash);
    SPECDEC_CHECK(head != nullptr && *head == end, "lookup index lost position " + std::to_string(end));
    if (before < 0) {
      heads.erase(hash);
    } else {
      *head = before;
    }
  }
}

void PromptLookupDrafter::append(Token token) {
  history_.push_back(token);
  prefix_.push_back(prefix_.back() * kBase + symbol(token));
  // Index every n-gram except those ending at the last position (the suffix looked up).
  const int n_to_index = static_cast<int>(history_.size()) - 1;
  while (n_indexed_ < n_to_index) index_ngrams_ending_at(n_indexed_++);
}

void PromptLookupDrafter::begin(std::span<const Token> prompt) {
  flush_to_cache();
  history_.clear();
  prefix_.assign(1, 0);
  for (auto& h : head_) h.clear();
  for (auto& p : prev_) p.clear();
  n_indexed_ = 0;
  n_flushed_ = 0;
  last_confidence_.clear();
  last_match_ = {};
  history_.reserve(prompt.size());
  for (Token t : prompt) append(t);
}

void PromptLookupDrafter::rollback(int n_tokens) {
  if (n_tokens < 0) throw Error("prompt lookup: rollback to a negative length " + std::to_string(n_tokens));
  if (n_tokens >= static_cast<int>(history_.size())) return;
  const int n_keep_indexed = std::max(0, n_tokens - 1);
  while (n_indexed_ > n_keep_indexed) unindex_ngrams_ending_at(--n_indexed_);
  history_.resize(static_cast<size_t>(n_tokens));
  prefix_.resize(static_cast<size_t>(n_tokens) + 1);
  n_flushed_ = std::min(n_flushed_, n_tokens);
}

void PromptLookupDrafter::sync(std::span<const Token> context) {
  const size_t n_common = committed_prefix_length(history_, context);
  rollback(static_cast<int>(n_common));
  for (size_t i = n_common; i < context.size(); ++i) append(context[i]);
}

void PromptLookupDrafter::accept(const Draft& draft, const Verdict& verdict) {
  for (int32_t node : verdict.path) {
    SPECDEC_CHECK(node >= 0 && node < draft.size(), "verdict path node " + std::to_string(node) +
                                                        " outside a draft of " + std::to_string(draft.size()));
    append(draft.tokens[static_cast<size_t>(node)]);
  }
  if (verdict.next >= 0) append(verdict.next);
}

LookupMatch PromptLookupDrafter::match_at(int n, int end) const {
  const int n_hist = static_cast<int>(history_.size());
  LookupMatch match{n, end, n};
  while (match.match_length < config_.max_match_length && end - match.match_length >= 0 &&
         history_[static_cast<size_t>(end - match.match_length)] ==
             history_[static_cast<size_t>(n_hist - 1 - match.match_length)]) {
    ++match.match_length;
  }
  return match;
}

std::vector<LookupMatch> PromptLookupDrafter::find_all(int n_matches) const {
  std::vector<LookupMatch> out;
  const int n_hist = static_cast<int>(history_.size());
  for (int n = std::min(config_.lookup_max, n_hist - 1); n >= config_.lookup_min; --n) {
    const int suffix_first = n_hist - n;
    const int32_t* head = head_[static_cast<size_t>(n - config_.lookup_min)].find(range_hash(suffix_first, n));
    if (head == nullptr) continue;
    const auto& prev = prev_[static_cast<size_t>(n - config_.lookup_min)];
    int steps = 0;
    for (int32_t end = *head; end >= 0 && steps < config_.max_chain_steps; end = prev[static_cast<size_t>(end)], ++steps) {
      if (!std::equal(history_.begin() + (end - n + 1), history_.begin() + end + 1, history_.begin() + suffix_first)) {
        continue;  // hash collision
      }
      // A longer suffix found this occurrence already.
      if (std::any_of(out.begin(), out.end(), [&](const LookupMatch& m) { return m.end == end; })) continue;
      out.push_back(match_at(n, end));
      if (static_cast<int>(out.size()) >= n_matches) return out;
    }
  }
  return out;
}

LookupMatch PromptLookupDrafter::find() const {
  const std::vector<LookupMatch> all = find_all(1);
  return all.empty() ? LookupMatch{} : all.front();
}

void PromptLookupDrafter::continuation(const LookupMatch& match, int n_tokens, std::vector<Token>& out) const {
  // Position n_hist + j repeats position end + 1 + j, itself proposed when past the history.
  const int n_hist = static_cast<int>(history_.size());
  const size_t first = out.size();
  for (int j = 0; j < n_tokens; ++j) {
    const int source = match.end + 1 + j;
    out.push_back(source < n_hist ? history_[static_cast<size_t>(source)]
                                  : out[first + static_cast<size_t>(source - n_hist)]);
  }
}

Draft PromptLookupDrafter::propose(std::span<const Token> context, int n_max, const SamplingParams& sampling) {
  (void)sampling;  // deterministic drafts
  const double t0 = now_seconds();
  sync(context);
  Draft draft;
  draft.rule = ChildRule::Deterministic;
  last_confidence_.clear();
  if (n_max > 0 && config_.tree_width > 1) {
    draft = propose_tree(n_max);
    draft_seconds_ += now_seconds() - t0;
    return draft;
  }
  last_match_ = n_max > 0 ? find() : LookupMatch{};
  const float match_confidence = float(last_match_.match_length) / float(last_match_.match_length + 1);
  if (last_match_.n > 0 && match_confidence < p_min_) last_match_ = {};
  if (last_match_.n > 0) {
    continuation(last_match_, n_max, draft.tokens);
    last_confidence_.assign(draft.tokens.size(), match_confidence);
  } else if (cache_ && n_max > 0) {
    const size_t n_tail = std::min(history_.size(), static_cast<size_t>(cache_->config().max_order - 1));
    std::span<const Token> tail(history_.data() + history_.size() - n_tail, n_tail);
    chain_predictions(tail, n_max, p_min_, [this](std::span<const Token> t) { return cache_->predict(t); },
                      draft.tokens, last_confidence_);
  }
  for (int i = 0; i < draft.size(); ++i) draft.parent.push_back(i - 1);
  draft_seconds_ += now_seconds() - t0;
  return draft;
}

void PromptLookupDrafter::flush_to_cache() {
  if (!cache_ || n_flushed_ >= static_cast<int>(history_.size())) return;
  cache_->add_sequence(history_, static_cast<size_t>(n_flushed_));
  n_flushed_ = static_cast<int>(history_.size());
}

}  // namespace specdec
