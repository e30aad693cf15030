// spec/speculative.cpp — the speculative decode loop (see speculative.h).
#include "specdec/speculative.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "spec/draft_length.h"
#include "specdec/error.h"
#include "specdec/timer.h"

namespace specdec {

namespace {

constexpr int kPrefillChunk = 256;    // rows per prefill forward (bounds scratch memory)
constexpr int kMaxTimedRows = 512;    // verify forwards larger than this are not timed per size
constexpr int kShadowLength = 4;      // tokens per shadow draft (deeper positions follow the last)
constexpr double kShadowCheap = 0.1;  // shadow drafts when one costs at most this many 1-row forwards
constexpr int kMaxShadowBackoff = 8;  // at most this many plain steps between failing shadows
// No shadows: an exploring draft after kExploreMin plain steps while the acceptance evidence is
// thin (fewer than kThinEvidence decayed observations at position 1) and drafts succeed; the
// wait doubles (up to kExploreInterval) after a draft failing at its first token, and after
// every exploring draft once the evidence is not thin (its estimate then decides).
constexpr int kExploreMin = 8;
constexpr int kExploreInterval = 48;
constexpr double kThinEvidence = 6.0;
// While the measured verify costs say no draft can pay, a plain step every this many steps carries
// one extra row (discarded) to re-time a 2-row forward: one preempted verify otherwise fixed the
// cost estimate for good (drafting stopped, so multi-row forwards were never timed again).
constexpr int kCostProbeInterval = 64;

}  // namespace

std::vector<double> SpecStats::acceptance_by_position() const {
  std::vector<double> out(drafted_by_pos.size(), 0.0);
  for (size_t k = 0; k < out.size(); ++k) {
    if (drafted_by_pos[k] > 0) out[k] = double(accepted_by_pos[k]) / double(drafted_by_pos[k]);
  }
  return out;
}

SpeculativeDecoder::SpeculativeDecoder(Transformer& target, Drafter* drafter, const SpecConfig& config, int n_ctx)
    : target_(target),
      drafter_(drafter),
      config_(config),
      cache_(target.new_cache(n_ctx)),
      controller_(std::make_unique<DraftLengthController>(64, kMaxTimedRows)),
      verify_rows_count_(kMaxTimedRows + 1, 0) {
  if (config_.draft_max < 0) throw Error("draft_max " + std::to_string(config_.draft_max) + " must be >= 0");
  if (config_.draft_min < 0 || config_.draft_min > config_.draft_max) {
    throw Error("draft_min " + std::to_string(config_.draft_min) + " must be in [0, draft_max = " +
                std::to_string(config_.draft_max) + "]");
  }
  if (!(config_.lenience > 0.0f && config_.lenience <= 1.0f)) {
    throw Error("lenience " + std::to_string(config_.lenience) + " must be in (0, 1]");
  }
  if (!(config_.draft_p_min >= 0.0f && config_.draft_p_min <= 1.0f)) {
    throw Error("draft_p_min " + std::to_string(config_.draft_p_min) + " must be in [0, 1]");
  }
  if (drafter_) drafter_->set_p_min(config_.draft_p_min);
  stats_.lossy = config_.lenience < 1.0f;
}

SpeculativeDecoder::~SpeculativeDecoder() = default;

void SpeculativeDecoder::begin(std::span<const Token> prompt, const SamplingParams& sampling) {
  if (prompt.empty()) throw Error("begin: empty prompt (at least one token, e.g. BOS, is needed)");
  if (static_cast<int>(prompt.size()) > n_ctx()) {
    throw Error("prompt of " + std::to_string(prompt.size()) + " tokens is longer than the context length " +
                std::to_string(n_ctx()));
  }
  const double t0 = now_seconds();
  sampling_ = sampling;
  rng_ = Rng(sampling.seed);
  steps_since_probe_ = 0;
  // Keep the cached prefix shared with the previous sequence (bit-identical by batch invariance).
  size_t n_keep = std::min({common_prefix_length(tokens_, prompt), static_cast<size_t>(cache_.size()), prompt.size() - 1});
  tokens_.assign(prompt.begin(), prompt.end());
  const bool features = wants_features();
  if (features) {
    std::vector<int32_t> layers = drafter_->feature_layers();
    const int width = (static_cast<int>(layers.size()) + 1) * target_.config().n_embd;
    if (layers != features_out_.layers || width != feature_width_) n_keep = 0;  // another layout
    features_out_.layers = std::move(layers);
    feature_width_ = width;
  }
  features_.resize(features ? n_keep * static_cast<size_t>(feature_width_) : 0);  // the kept prefix's stay valid
  cache_.truncate(static_cast<int>(n_keep));
  KvCache* caches[] = {&cache_};
  for (size_t start = n_keep; start + 1 < prompt.size(); start += kPrefillChunk) {
    const size_t end = std::min(prompt.size() - 1, start + kPrefillChunk);
    batch_.clear();
    for (size_t i = start; i < end; ++i) {
      batch_.add(prompt[i], static_cast<int32_t>(i), i == start ? -1 : static_cast<int32_t>(i - start - 1), 0, false,
                 features);
    }
    target_.forward(batch_, caches, logits_, features ? &features_out_ : nullptr);
    if (features) {
      for (int row = 0; row < features_out_.n_rows(); ++row) append_feature_row(row);
    }
  }
  stats_.n_prefill_tokens += static_cast<int64_t>(prompt.size() - 1 - n_keep);
  shadow_.clear();
  shadow_path_.clear();
  if (drafter_) {
    if (!controller_->has_single_row_measurement()) probe_single_row();
    drafter_->begin(prompt);
    share_features();
    drafter_->catch_up(prompt);
    drafter_seen_ = static_cast<int>(prompt.size());
  }
  stats_.prefill_seconds += now_seconds() - t0;
}

void SpeculativeDecoder::probe_single_row() {
  // Two timed 1-row forwards of the last committed token (the first may pay for cold caches),
  // undone afterwards: the cache holds tokens_[0 .. size-1) again, bit for bit.
  const int n = static_cast<int>(tokens_.size());
  KvCache* caches[] = {&cache_};
  for (int i = 0; i < 2; ++i) {
    batch_.clear();
    batch_.add(tokens_.back(), n - 1, -1, 0, true);
    const double t0 = now_seconds();
    target_.forward(batch_, caches, logits_);
    controller_->observe_verify(1, now_seconds() - t0);
    cache_.truncate(n - 1);
  }
  steps_since_probe_ = 0;
}

int SpeculativeDecoder::choose_k(int n_max_new) {
  const int n = static_cast<int>(tokens_.size());
  // K + 1 emitted tokens must fit in the context and in n_max_new.
  const int k_cap = std::min(n_ctx() - n - 1, n_max_new - 1);
  want_shadow_ = false;
  want_cost_probe_ = false;
  exploring_ = false;
  if (!drafter_ || k_cap <= 0) return 0;
  if (!config_.adaptive) return std::min(config_.draft_max, k_cap);
  if (config_.draft_max == 0) return 0;
  const double shadow_cost = controller_->c_draft() * std::min(config_.draft_max, kShadowLength);
  if (!controller_->has_draft_timing() ||
      (controller_->n_draft_observations() < DraftLengthController::kDraftWarmup && shadow_cost <= 1.0)) {
    // The first proposals are shadows: they measure c_draft without paying for verifications.
    want_shadow_ = shadow_.empty();
    return config_.draft_min > 0 ? std::min(config_.draft_min, k_cap) : 0;
  }
  // Shadow drafts when a shadow costs at most kShadowCheap 1-row forwards (they are spaced to stay
  // within shadow_budget anyway); off again only when one costs a whole forward, so that timing
  // noise does not flip the prior back and forth.
  const bool was_shadowing = shadow_mode_;
  if (!shadow_decided_) {
    shadow_mode_ = config_.shadow && shadow_cost <= kShadowCheap;
    shadow_decided_ = true;
  } else if (shadow_mode_ && shadow_cost > 1.0) {
    shadow_mode_ = false;
  } else if (!shadow_mode_ && config_.shadow && shadow_cost <= kShadowCheap) {
    shadow_mode_ = true;
  }
  if (shadow_mode_ != was_shadowing || controller_->n_prior_sets() == 0) {
    // Cheap drafters are observed for free at plain steps, so they draft only on evidence;
    // expensive ones (a draft model) start from an even prior and learn from real drafts.
    controller_->set_prior(shadow_mode_ ? 0.0 : 0.5);
  }
  int k = controller_->choose(config_.draft_min, config_.draft_max);
  if (k > config_.draft_min && steps_since_probe_ >= config_.probe_interval) {
    k = config_.draft_min;  // keep the 1-row timing fresh
  }
  if (k == 0 && !shadow_mode_ && steps_since_draft_ >= explore_wait_ &&
      controller_->drafting_can_pay(config_.draft_max)) {
    // Without shadows, an occasional draft keeps the acceptance estimate fresh: the best K >= 1
    // at the current estimates, which also times that verify size. Not when drafting could not
    // pay even if always accepted: each exploration makes a draft model catch up on every token
    // since its last proposal, which then costs about c_draft per token. Before the back-off
    // (a fixed 48 steps of 1-token drafts), two rejections at the start of the demo pair's text
    // (acceptance 0.96 later) kept it plain for 150 of 200 tokens: 0.8-0.9x plain decoding.
    k = controller_->choose(std::max(1, config_.draft_min), config_.draft_max);
    exploring_ = true;
  }
  if (k == 0 && shadow_mode_ && shadow_.empty()) {
    // Shadows cost about shadow_cost each: space them so they stay within shadow_budget per step,
    // and further apart while they keep failing at their first token.
    if (shadow_wait_ > 0) {
      --shadow_wait_;
    } else {
      want_shadow_ = true;
      const int spacing = static_cast<int>(std::ceil(shadow_cost / std::max(1e-9, config_.shadow_budget)));
      shadow_wait_ = std::max(spacing, shadow_backoff_) - 1;
    }
  }
  if (k == 0 && steps_since_draft_ >= kCostProbeInterval && steps_since_cost_probe_ >= kCostProbeInterval &&
      !controller_->drafting_can_pay(config_.draft_max)) {
    want_cost_probe_ = true;
  }
  return std::min(k, k_cap);
}

void SpeculativeDecoder::observe_verify_timing(int n_rows, double seconds) {
  controller_->observe_verify(n_rows, seconds);
}

double SpeculativeDecoder::estimated_verify_cost(int n_rows) const { return controller_->verify_cost(n_rows); }

bool SpeculativeDecoder::drafting_can_pay() const { return controller_->drafting_can_pay(config_.draft_max); }

int SpeculativeDecoder::draft_units(int n_proposed) {
  // A proposal also catches the drafter up on the tokens committed since its last one (its
  // tables, its cache): per-token cost = time / (proposed + caught-up tokens), so that rare
  // proposals do not look expensive because they catch up on many tokens at once.
  const int n = static_cast<int>(tokens_.size());
  const int n_caught_up = std::max(0, n - drafter_seen_);
  drafter_seen_ = n;
  return std::max(1, n_proposed + n_caught_up);
}

void SpeculativeDecoder::share_features() {
  if (!wants_features()) return;
  SPECDEC_CHECK(feature_width_ > 0 && features_.size() == static_cast<size_t>(cache_.size()) * feature_width_,
                "decoder holds " + std::to_string(features_.size()) + " feature floats for " +
                    std::to_string(cache_.size()) + " cached tokens of width " + std::to_string(feature_width_));
  drafter_->set_features(features_, feature_width_);
}

void SpeculativeDecoder::append_feature_row(int row) {
  const size_t n_embd = static_cast<size_t>(features_out_.n_embd);
  for (size_t j = 0; j < features_out_.layers.size(); ++j) {
    const float* r = features_out_.layer_row(row, static_cast<int>(j));
    features_.insert(features_.end(), r, r + n_embd);
  }
  const float* f = features_out_.row(row);
  features_.insert(features_.end(), f, f + n_embd);
}

void SpeculativeDecoder::start_shadow(int n_max) {
  share_features();
  const double t_draft = drafter_->draft_seconds();
  shadow_ = drafter_->propose(tokens_, n_max, sampling_);
  controller_->observe_draft(draft_units(shadow_.size()), drafter_->draft_seconds() - t_draft);
  validate_draft(shadow_);
  shadow_path_.clear();
  if (!shadow_.empty()) ++stats_.n_shadow_drafts;
}

void SpeculativeDecoder::observe_path(const Draft& draft, const std::vector<int32_t>& path) {
  // Depth d accepted; position d + 1 was tried (and rejected) only if the last node has children.
  const int32_t last = path.empty() ? -1 : path.back();
  const bool has_children = std::any_of(draft.parent.begin(), draft.parent.end(), [&](int32_t p) { return p == last; });
  const int depth = static_cast<int>(path.size());
  controller_->observe_acceptance(depth + (has_children ? 1 : 0), depth);
}

void SpeculativeDecoder::check_shadow(Token emitted) {
  if (shadow_.empty()) return;
  const int32_t at = shadow_path_.empty() ? -1 : shadow_path_.back();
  int32_t child = -1;
  for (int i = 0; i < shadow_.size() && child < 0; ++i) {
    if (shadow_.parent[static_cast<size_t>(i)] == at && shadow_.tokens[static_cast<size_t>(i)] == emitted) child = i;
  }
  if (child >= 0) shadow_path_.push_back(child);
  const bool leaf = child >= 0 && std::none_of(shadow_.parent.begin(), shadow_.parent.end(),
                                               [&](int32_t p) { return p == child; });
  if (child < 0 || leaf) {
    observe_path(shadow_, shadow_path_);
    // Failing at the first token: shadow less often (up to every kMaxShadowBackoff plain steps).
    shadow_backoff_ = shadow_path_.empty() ? std::min(kMaxShadowBackoff, 2 * shadow_backoff_) : 1;
    shadow_.clear();
    shadow_path_.clear();
  }
}

SparseDist SpeculativeDecoder::target_row(const Logits& logits, int row, std::span<const Token> path) const {
  // Penalty history: the committed tokens (the tail the penalties look at) + the draft path.
  size_t n_tail = tokens_.size();
  if (sampling_.repeat_last_n >= 0) n_tail = std::min(n_tail, static_cast<size_t>(sampling_.repeat_last_n));
  std::vector<Token> history(tokens_.end() - static_cast<std::ptrdiff_t>(n_tail), tokens_.end());
  history.insert(history.end(), path.begin(), path.end());
  return make_distribution(std::span<const float>(logits.row(row), static_cast<size_t>(logits.n_vocab)), sampling_,
                           history);
}

std::vector<Token> SpeculativeDecoder::step(int n_max_new) {
  if (n_max_new < 1) throw Error("step: n_max_new " + std::to_string(n_max_new) + " must be >= 1");
  if (tokens_.empty()) throw Error("step before begin()");
  const int n = static_cast<int>(tokens_.size());
  if (n >= n_ctx()) throw Error("context full: " + std::to_string(n) + " tokens of " + std::to_string(n_ctx()));
  SPECDEC_CHECK(cache_.size() == n - 1, "target cache holds " + std::to_string(cache_.size()) + " of " +
                                            std::to_string(n - 1) + " committed tokens");
  const double t_step = now_seconds();
  ++steps_since_probe_;

  // 1. Draft (or, at a plain step, maybe a shadow draft checked against what the target emits).
  Draft draft;
  const int k = choose_k(n_max_new);
  if (k > 0) {
    shadow_.clear();  // abandoned: its outcome is no longer observed token by token
    shadow_path_.clear();
    share_features();
    const double t_draft = drafter_->draft_seconds();
    draft = drafter_->propose(tokens_, k, sampling_);
    controller_->observe_draft(draft_units(draft.size()), drafter_->draft_seconds() - t_draft);
    validate_draft(draft);
    if (draft.size() > k) {
      throw Error("drafter " + drafter_->name() + " proposed " + std::to_string(draft.size()) + " nodes, more than " +
                  std::to_string(k));
    }
    for (Token t : draft.tokens) {
      if (t >= target_.config().n_vocab) {
        throw Error("drafter " + drafter_->name() + " proposed token id " + std::to_string(t) +
                    " outside the target vocabulary of " + std::to_string(target_.config().n_vocab));
      }
    }
  }
  // A shadow draft proposed at this step: the drafter learns the verdict below (shadow_ is not
  // touched until then, so no copy is needed).
  bool shadow_now = false;
  if (k == 0 && want_shadow_ && shadow_.empty()) {
    start_shadow(std::min({config_.draft_max, kShadowLength, n_ctx() - n - 1}));
    shadow_now = !shadow_.empty();
  }
  const std::vector<int32_t> depth = node_depths(draft);  // (n_nodes)

  // 2. One target forward over [last, nodes...] (a chain or the tree).
  batch_.clear();
  const bool features = wants_features();  // every row's: the accepted ones are known only later
  batch_.add(tokens_.back(), n - 1, -1, 0, true, features);
  for (int i = 0; i < draft.size(); ++i) {
    batch_.add(draft.tokens[static_cast<size_t>(i)], n - 1 + depth[static_cast<size_t>(i)],
               draft.parent[static_cast<size_t>(i)] + 1, 0, true, features);
  }
  // Cost probe: the last token again one position on, a child of row 0. Row 0's logits are
  // bit-identical with or without it (batch invariance); its cache slot is dropped in 4.
  const bool cost_probe = k == 0 && want_cost_probe_;
  if (cost_probe) batch_.add(tokens_.back(), n, 0, 0, true, false);
  KvCache* caches[] = {&cache_};
  const double t_forward = now_seconds();
  target_.forward(batch_, caches, logits_, features ? &features_out_ : nullptr);
  const double forward_seconds = now_seconds() - t_forward;
  controller_->observe_verify(batch_.size(), forward_seconds);
  const int n_rows = batch_.size() - (cost_probe ? 1 : 0);  // rows of real tokens
  steps_since_cost_probe_ = cost_probe ? 0 : steps_since_cost_probe_ + 1;
  stats_.n_cost_probes += cost_probe ? 1 : 0;
  if (batch_.size() == 1) steps_since_probe_ = 0;  // a 1-row forward was timed
  steps_since_draft_ = draft.empty() ? steps_since_draft_ + 1 : 0;
  ++stats_.n_target_passes;
  if (draft.size() > 0 && n_rows <= kMaxTimedRows) ++verify_rows_count_[static_cast<size_t>(n_rows)];

  // 3. Acceptance (target rows computed lazily, penalties see the path as history).
  const TargetRow rows = [&](int row) {
    return target_row(logits_, row, row == 0 ? std::vector<Token>{} : path_tokens(draft, row - 1));
  };
  Verdict verdict;
  if (sampling_.greedy()) {
    verdict = accept_greedy(draft, rows);
  } else {
    AcceptOptions options;
    options.lenience = config_.lenience;
    options.bug = config_.bug;
    verdict = accept_sampling(draft, rows, rng_, options);
  }
  const int n_accepted = verdict.n_accepted();
  if (draft.size() > 0) {
    const bool thin = controller_->evidence(1) < kThinEvidence;
    const bool back_off = n_accepted == 0 || (exploring_ && !thin);
    explore_wait_ = back_off ? std::min(kExploreInterval, 2 * explore_wait_) : kExploreMin;
  }

  // 4. Target KV: keep the last token's row and the accepted path, contiguous.
  bool prefix_chain = true;
  for (int i = 0; i < n_accepted; ++i) prefix_chain = prefix_chain && verdict.path[static_cast<size_t>(i)] == i;
  if (prefix_chain) {
    cache_.truncate(n + n_accepted);
  } else {
    std::vector<int> keep = {0};
    for (int node : verdict.path) keep.push_back(node + 1);
    cache_.keep_rows(n - 1, keep);
  }
  if (features) {  // the features of the rows just kept: the last token's, then the path's
    append_feature_row(0);
    for (int node : verdict.path) append_feature_row(node + 1);
  }

  // 5. Drafter rollback, commit, stats.
  if (drafter_ && draft.size() > 0) drafter_->accept(draft, verdict);
  if (drafter_ && draft.empty() && shadow_now) drafter_->accept(shadow_, verdict);  // all rejected
  if (draft.empty()) check_shadow(verdict.next);
  last_step_ = StepInfo{};
  last_step_.n_drafted = draft.size();
  last_step_.n_accepted = n_accepted;
  last_step_.n_rows = n_rows;
  int max_depth = 0;
  for (int d : depth) max_depth = std::max(max_depth, d);
  // A bonus: the last accepted node is a leaf, so next was drawn from its own row.
  last_step_.bonus = n_accepted > 0 && std::none_of(draft.parent.begin(), draft.parent.end(),
                                                    [&](int32_t p) { return p == verdict.path.back(); });
  for (int node : verdict.path) last_step_.emitted.push_back(draft.tokens[static_cast<size_t>(node)]);
  last_step_.emitted.push_back(verdict.next);
  tokens_.insert(tokens_.end(), last_step_.emitted.begin(), last_step_.emitted.end());

  if (draft.size() > 0) {
    observe_path(draft, verdict.path);
    ++stats_.n_drafting_steps;
    if (!draft.is_chain()) ++stats_.n_tree_steps;
    if (stats_.steps_by_accepted_depth.size() <= static_cast<size_t>(n_accepted)) {
      stats_.steps_by_accepted_depth.resize(static_cast<size_t>(n_accepted) + 1, 0);
    }
    ++stats_.steps_by_accepted_depth[static_cast<size_t>(n_accepted)];
  }
  stats_.n_drafted += draft.size();
  stats_.n_accepted += n_accepted;
  stats_.n_emitted += static_cast<int64_t>(last_step_.emitted.size());
  if (stats_.drafted_by_pos.size() < static_cast<size_t>(max_depth)) {
    stats_.drafted_by_pos.resize(static_cast<size_t>(max_depth), 0);
    stats_.accepted_by_pos.resize(static_cast<size_t>(max_depth), 0);
  }
  for (int d = 1; d <= max_depth; ++d) {
    ++stats_.drafted_by_pos[static_cast<size_t>(d - 1)];
    if (d <= n_accepted) ++stats_.accepted_by_pos[static_cast<size_t>(d - 1)];
  }
  stats_.decode_seconds += now_seconds() - t_step;
  return last_step_.emitted;
}

void SpeculativeDecoder::rollback(int n_tokens) {
  if (n_tokens < 1 || n_tokens > static_cast<int>(tokens_.size())) {
    throw Error("rollback to " + std::to_string(n_tokens) + " tokens: the sequence has " +
                std::to_string(tokens_.size()) + " (at least 1 must remain)");
  }
  tokens_.resize(static_cast<size_t>(n_tokens));
  cache_.truncate(std::min(cache_.size(), n_tokens - 1));
  if (!features_.empty()) features_.resize(static_cast<size_t>(cache_.size()) * feature_width_);
  shadow_.clear();
  shadow_path_.clear();
  if (drafter_) drafter_->rollback(n_tokens);
}

const SpecStats& SpeculativeDecoder::stats() {
  if (!controller_->has_single_row_measurement()) {  // e.g. fixed K without plain steps: unknown
    stats_.c_draft = stats_.verify_cost = stats_.target_row_seconds = 0.0;
    return stats_;
  }
  stats_.c_draft = controller_->c_draft();
  stats_.target_row_seconds = controller_->single_row_seconds();
  double weighted = 0.0;
  int64_t count = 0;
  for (size_t m = 1; m < verify_rows_count_.size(); ++m) {
    weighted += static_cast<double>(verify_rows_count_[m]) * controller_->verify_cost(static_cast<int>(m));
    count += verify_rows_count_[m];
  }
  stats_.verify_cost = (count > 0 && stats_.target_row_seconds > 0.0) ? weighted / static_cast<double>(count) : 0.0;
  return stats_;
}

void SpeculativeDecoder::reset_stats() {
  const bool lossy = stats_.lossy;
  stats_ = SpecStats{};
  stats_.lossy = lossy;
  std::fill(verify_rows_count_.begin(), verify_rows_count_.end(), 0);
}

}  // namespace specdec
