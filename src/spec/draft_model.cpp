// spec/draft_model.cpp — DraftModelDrafter: cache bookkeeping and chain drafting (as steps of
// one draft forward each, so that BatchedDraft can share the forwards among sequences).
// Tree drafting is in draft_model_tree.cpp.
#include <algorithm>
#include <limits>
#include <string>

#include "specdec/draft_model.h"
#include "specdec/error.h"
#include "specdec/timer.h"

namespace specdec {

namespace {

constexpr int kDraftCatchUpRows = 256;                            // rows per catch-up forward
constexpr uint64_t kDraftStream = 0xD8AF7E5EED5EEDULL;  // draft Rng = seed ^ this

float max_prob(const SparseDist& d) {
  float best = 0.0f;
  for (float p : d.probs) best = std::max(best, p);
  return best;
}

// The planted TransformOnPOnly bug records q as the plain softmax of the logits.
SamplingParams untransformed() {
  SamplingParams raw;
  raw.temperature = 1.0f;
  raw.top_k = 0;
  raw.top_p = 1.0f;
  raw.min_p = 0.0f;
  return raw;
}

}  // namespace

DraftModelDrafter::DraftModelDrafter(Transformer& draft_model, const DraftModelOptions& options)
    : model_(draft_model), options_(options), cache_(draft_model.new_cache(options.n_ctx)) {
  if (options_.tree_nodes < 0) throw Error("tree_nodes " + std::to_string(options_.tree_nodes) + " must be >= 0");
  if (options_.tree_nodes > 0 && (options_.tree_width < 1 || options_.tree_depth < 0)) {
    throw Error("tree width " + std::to_string(options_.tree_width) + " and depth " +
                std::to_string(options_.tree_depth) + " must be >= 1 and >= 0 (0: the node budget)");
  }
  if (options_.n_vocab_target < 0) throw Error("n_vocab_target " + std::to_string(options_.n_vocab_target));
  if (!(options_.tree_rank_temperature > 0.0f))
    throw Error("tree rank temperature " + std::to_string(options_.tree_rank_temperature) + " must be > 0");
}

void DraftModelDrafter::forward_chain(std::span<const Token> tokens, bool want_last, std::vector<float>* last_logits) {
  KvCache* caches[] = {&cache_};
  for (size_t start = 0; start < tokens.size(); start += kDraftCatchUpRows) {
    const size_t end = std::min(tokens.size(), start + kDraftCatchUpRows);
    const int pos0 = cache_.size();
    batch_.clear();
    for (size_t i = start; i < end; ++i) {
      const bool logits = want_last && i + 1 == tokens.size();
      batch_.add(tokens[i], pos0 + static_cast<int32_t>(i - start), i == start ? -1 : static_cast<int32_t>(i - start - 1),
                 0, logits);
    }
    model_.forward(batch_, caches, logits_);
    ++forwards_;
    forwarded_rows_ += static_cast<int64_t>(end - start);
    cached_.insert(cached_.end(), tokens.begin() + static_cast<std::ptrdiff_t>(start),
                   tokens.begin() + static_cast<std::ptrdiff_t>(end));
  }
  if (want_last) {
    SPECDEC_CHECK(logits_.n_rows() == 1, "draft forward returned no logits");
    last_logits->assign(logits_.row(0), logits_.row(0) + logits_.n_vocab);
  }
}

std::vector<float> DraftModelDrafter::sync(std::span<const Token> context) {
  SPECDEC_CHECK(!context.empty(), "draft sync with an empty context");
  drop_tree_rows();
  // Reuse the longest cached prefix; the last context token is always forwarded for its logits.
  const size_t n_keep = std::min(common_prefix_length(cached_, context), context.size() - 1);
  cache_.truncate(static_cast<int>(n_keep));
  cached_.resize(n_keep);
  std::vector<float> logits;  // (n_vocab_draft)
  forward_chain(context.subspan(n_keep), true, &logits);
  return logits;
}

std::span<const float> DraftModelDrafter::masked(std::vector<float>& logits) const {
  if (options_.n_vocab_target > 0 && static_cast<size_t>(options_.n_vocab_target) < logits.size()) {
    std::fill(logits.begin() + options_.n_vocab_target, logits.end(), -std::numeric_limits<float>::infinity());
  }
  return logits;
}

void DraftModelDrafter::begin(std::span<const Token> prompt) {
  if (prompt.empty()) throw Error("draft model: empty prompt");
  seeded_ = false;
  n_forwarded_ = 0;
  drop_tree_rows();
  const size_t n_keep = std::min(common_prefix_length(cached_, prompt), prompt.size() - 1);
  cache_.truncate(static_cast<int>(n_keep));
  cached_.resize(n_keep);
  const size_t n_prefill = std::min(prompt.size() - 1, static_cast<size_t>(cache_.capacity()));
  if (n_prefill > n_keep) forward_chain(prompt.subspan(n_keep, n_prefill - n_keep), false, nullptr);
}

Draft DraftModelDrafter::propose(std::span<const Token> context, int n_max, const SamplingParams& sampling) {
  const double t0 = now_seconds();
  if (options_.tree_nodes == 0) {
    // Chains run the same steps as a BatchedDraft, with forwards of this drafter's rows alone.
    start_chain(context, n_max, sampling);
    KvCache* caches[] = {&cache_};
    for (;;) {
      batch_.clear();
      if (add_step_rows(batch_, 0, kDraftCatchUpRows) == 0) break;
      model_.forward(batch_, caches, logits_);
      ++forwards_;
      take_step_logits(logits_, step_wants_logits() ? 0 : -1);
    }
    return finish_chain(now_seconds() - t0);
  }
  n_max = start_proposal(context, n_max, sampling);
  Draft draft;
  if (n_max > 0 && !context.empty()) draft = propose_tree(context, n_max, sampling);
  draft_seconds_ += now_seconds() - t0;
  return draft;
}

int DraftModelDrafter::start_proposal(std::span<const Token> context, int n_max, const SamplingParams& sampling) {
  if (!seeded_) {
    rng_ = Rng(sampling.seed ^ kDraftStream);
    seeded_ = true;
  }
  propose_base_ = static_cast<int>(context.size());
  n_forwarded_ = 0;
  drop_tree_rows();
  // Every drafted node needs a draft position: context + (n_max - 1) forwarded tokens.
  return std::min(n_max, cache_.capacity() - static_cast<int>(context.size()) + 1);
}

void DraftModelDrafter::start_chain(std::span<const Token> context, int n_max, const SamplingParams& sampling) {
  SPECDEC_CHECK(batchable(), "draft model: step-wise proposals are for chains");
  step_ = ChainStep{};
  step_.n_max = start_proposal(context, n_max, sampling);
  if (step_.n_max <= 0 || context.empty()) return;  // done: an empty (deterministic) draft
  step_.done = false;
  step_.sampling = sampling;
  step_.draft.rule = ChildRule::IndependentWithReplacement;  // a chain of single draws from q
  step_.history.assign(context.begin(), context.end());
  // Reuse the longest cached prefix; the last context token is always forwarded for its logits.
  const size_t n_keep = std::min(common_prefix_length(cached_, context), context.size() - 1);
  cache_.truncate(static_cast<int>(n_keep));
  cached_.resize(n_keep);
  step_.pending.assign(context.begin() + static_cast<std::ptrdiff_t>(n_keep), context.end());
}

int DraftModelDrafter::add_step_rows(Batch& batch, int32_t seq, int max_rows) {
  step_.rows_in_flight = 0;
  step_.want_logits = false;
  if (step_.done) return 0;
  SPECDEC_CHECK(max_rows >= 1, "draft step with no room for rows");
  const size_t left = step_.pending.size() - step_.pending_pos;
  const int n = static_cast<int>(std::min({left, static_cast<size_t>(max_rows), static_cast<size_t>(kDraftCatchUpRows)}));
  const int pos0 = cache_.size();
  const int base = batch.size();
  step_.want_logits = static_cast<size_t>(n) == left;
  for (int j = 0; j < n; ++j) {
    batch.add(step_.pending[step_.pending_pos + static_cast<size_t>(j)], pos0 + j, j == 0 ? -1 : base + j - 1, seq,
              step_.want_logits && j + 1 == n);
  }
  step_.rows_in_flight = n;
  return n;
}

void DraftModelDrafter::take_step_logits(const Logits& logits, int row) {
  SPECDEC_CHECK(!step_.done && step_.rows_in_flight > 0, "draft step: logits without rows in flight");
  const auto first = step_.pending.begin() + static_cast<std::ptrdiff_t>(step_.pending_pos);
  cached_.insert(cached_.end(), first, first + step_.rows_in_flight);
  forwarded_rows_ += step_.rows_in_flight;
  step_.pending_pos += static_cast<size_t>(step_.rows_in_flight);
  step_.rows_in_flight = 0;
  SPECDEC_CHECK(cache_.size() == static_cast<int>(cached_.size()), "draft step: cache and tokens disagree");
  if (!step_.want_logits) return;  // more catch-up rows to come
  SPECDEC_CHECK(row >= 0 && row < logits.n_rows(), "draft step: missing logits row");
  step_.logits.assign(logits.row(row), logits.row(row) + logits.n_vocab);
  if (step_.pending_is_draft) ++n_forwarded_;
  step_.pending.clear();
  step_.pending_pos = 0;
  step_.pending_is_draft = false;
  draw_next();
}

float DraftModelDrafter::confidence(const SparseDist& q) {
  ChainStep& s = step_;
  if (!s.sampling.greedy()) return max_prob(q);
  // Greedy: q is one-hot, so the confidence is the top probability at temperature 1 (the same
  // ranking the tree drafter uses), with the request's other settings.
  SamplingParams ranking = s.sampling;
  ranking.temperature = 1.0f;
  return max_prob(make_distribution(masked(s.logits), ranking, s.history));
}

void DraftModelDrafter::draw_next() {
  ChainStep& s = step_;
  if (s.i >= s.n_max) {  // only after QRecomputedAfter forwarded the last draw
    s.done = true;
    return;
  }
  SparseDist q = make_distribution(masked(s.logits), s.sampling, s.history);
  if (p_min_ > 0.0f && confidence(q) < p_min_) {
    s.done = true;
    return;
  }
  const Token x = sample(q, rng_);
  if (options_.bug == PlantedBug::TransformOnPOnly) q = make_distribution(masked(s.logits), untransformed(), s.history);
  if (options_.bug == PlantedBug::QRecomputedAfter && s.i > 0) s.q_after.push_back(q);
  s.draft.add(x, s.i - 1, std::move(q));
  s.history.push_back(x);
  ++s.i;
  if (s.i < s.n_max || options_.bug == PlantedBug::QRecomputedAfter) {
    s.pending.assign(1, x);  // forwarded next step for the next draw's logits
    s.pending_is_draft = true;
  } else {
    s.done = true;
  }
}

Draft DraftModelDrafter::finish_chain(double seconds) {
  SPECDEC_CHECK(step_.done, "draft step: chain finished before its last step");
  Draft draft = std::move(step_.draft);
  if (options_.bug == PlantedBug::QRecomputedAfter && draft.size() > 0) {
    if (n_forwarded_ == draft.size()) {
      step_.q_after.push_back(make_distribution(masked(step_.logits), step_.sampling, step_.history));
    }
    for (size_t i = 0; i < step_.q_after.size() && i < draft.q.size(); ++i) draft.q[i] = step_.q_after[i];
  }
  step_ = ChainStep{};
  draft_seconds_ += seconds;
  return draft;
}

void DraftModelDrafter::accept(const Draft& draft, const Verdict& verdict) {
  if (!tree_slot_.empty()) {
    accept_tree(draft, verdict);  // see draft_model_tree.cpp
    return;
  }
  // Chains: the cache holds the context plus n_forwarded_ draft tokens; keep the accepted ones.
  const int n_keep = propose_base_ + std::min(verdict.n_accepted(), n_forwarded_);
  if (n_keep < cache_.size()) {
    cache_.truncate(n_keep);
    cached_.resize(static_cast<size_t>(n_keep));
  }
  n_forwarded_ = 0;
}

void DraftModelDrafter::rollback(int n_tokens) {
  drop_tree_rows();
  if (n_tokens < cache_.size()) {
    cache_.truncate(std::max(0, n_tokens));
    cached_.resize(static_cast<size_t>(cache_.size()));
  }
}

}  // namespace specdec
