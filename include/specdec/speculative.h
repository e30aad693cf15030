// specdec/speculative.h — the decode loop for ONE sequence: draft -> one target forward over
// [last token, draft...] -> acceptance -> KV rollback -> emit 1..K+1 tokens. Plain decoding is
// the same loop without a drafter, so the engine has one loop.
//
// Seeds (the guarantee): the decoder draws every target-side random number from one Rng seeded
// with SamplingParams::seed at begin(); drafters that sample seed their own stream from the same
// seed. Hence
//   * greedy output is identical to plain greedy decoding, whatever the drafter, K or timing;
//   * sampled output with the same seed, settings and a fixed K (adaptive off) is reproducible;
//     adaptive K follows measured timings, so it may differ run to run;
//   * speculative and plain sampling produce the SAME DISTRIBUTION over outputs, not the same
//     text for a given seed (they consume random numbers differently).
// lenience < 1 (opt-in) breaks the exactness and is reported as lossy in the stats.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "specdec/acceptance.h"
#include "specdec/drafter.h"
#include "specdec/model.h"
#include "specdec/rng.h"
#include "specdec/sampling.h"

namespace specdec {

class DraftLengthController;

struct SpecConfig {
  int draft_max = 8;          // K upper bound (node budget for tree drafters)
  int draft_min = 0;          // K lower bound; 0 lets the adaptive rule take plain steps
  float draft_p_min = 0.0f;   // drafters stop when their top probability falls below this (0: off)
  bool adaptive = true;       // false: K = draft_max every step (capped by context / max tokens)
  float lenience = 1.0f;      // (0, 1]; < 1 is LOSSY (Leviathan et al. A.5)
  int probe_interval = 64;    // adaptive: a plain step every N steps keeps the 1-row timing fresh
  // Adaptive only: when proposals are cheap (a proposal of up to 4 tokens measured at <= 0.1
  // 1-row target forwards, e.g. the model-free drafters; without shadows, an exploring draft
  // after 8-48 plain steps refreshes the acceptance estimate instead), plain steps still ask the drafter for a
  // proposal, do not verify it, and compare it with the tokens the target then emits ("shadow"
  // drafts). This measures the acceptance rate without paying for verification, so such
  // drafters start from a pessimistic prior (no drafting until the evidence says it pays) and
  // resume drafting as soon as the text turns repetitive. For deterministic drafts
  // P(emitted == draft token) is exactly the acceptance probability, under greedy decoding and
  // under sampling. Shadows are spaced so that their cost stays within shadow_budget (in 1-row
  // forwards per plain step), and spaced further while they fail at their first token.
  bool shadow = true;
  double shadow_budget = 0.01;
  PlantedBug bug = PlantedBug::None;  // testing hook (acceptance.h); never set outside tests
};

// What one step did (for --show-drafts and per-step statistics).
struct StepInfo {
  int n_drafted = 0;        // draft nodes verified (0: plain step)
  int n_accepted = 0;       // accepted draft tokens (the first n_accepted emitted tokens)
  bool bonus = false;       // every draft token on the path was accepted and next is a bonus
  int n_rows = 0;           // rows of the target forward
  std::vector<Token> emitted;  // accepted draft tokens, then the corrected / bonus / plain token
};

struct SpecStats {
  int64_t n_target_passes = 0;   // decode forwards of the target (prefill excluded)
  int64_t n_drafted = 0;         // draft nodes verified
  int64_t n_accepted = 0;        // draft tokens accepted
  int64_t n_emitted = 0;         // tokens emitted by step()
  int64_t n_prefill_tokens = 0;
  int64_t n_drafting_steps = 0;  // steps whose target forward verified at least one draft node
  int64_t n_tree_steps = 0;      // drafting steps whose draft was a tree (not a chain)
  int64_t n_shadow_drafts = 0;   // proposals checked against plain steps instead of verified
  // Plain steps that carried one extra, discarded row to re-time a 2-row forward (adaptive mode,
  // while the measured verify costs say drafting cannot pay; see SpeculativeDecoder::step).
  int64_t n_cost_probes = 0;
  // (max depth + 1) [d]: drafting steps whose accepted path had depth d (tokens accepted).
  std::vector<int64_t> steps_by_accepted_depth;
  std::vector<int64_t> drafted_by_pos;   // (max position) [k-1]: steps whose draft reached depth k
  std::vector<int64_t> accepted_by_pos;  // (max position) [k-1]: steps that accepted depth k
  double decode_seconds = 0.0;   // time inside step()
  double prefill_seconds = 0.0;  // time inside begin()
  // The costs need a measured 1-row forward: the first begin() of a decoder with a drafter times
  // two 1-row probe forwards (counted in prefill_seconds), plain steps refresh it, and adaptive
  // mode takes a plain step every probe_interval steps when none happened.
  double c_draft = 0.0;          // measured draft-token time / 1-row target forward time (0: unknown)
  double verify_cost = 0.0;      // mean over verify passes of t(M) / t(1) (0: unknown)
  double target_row_seconds = 0.0;  // measured (or fitted) 1-row target forward time
  bool lossy = false;            // lenience < 1 was used

  double acceptance_rate() const { return n_drafted ? double(n_accepted) / double(n_drafted) : 0.0; }
  double mean_tokens_per_pass() const { return n_target_passes ? double(n_emitted) / double(n_target_passes) : 0.0; }
  double tokens_per_second() const { return decode_seconds > 0 ? double(n_emitted) / decode_seconds : 0.0; }
  // Draft nodes verified per drafting step, and accepted depth per drafting step.
  double mean_nodes_per_drafting_step() const { return n_drafting_steps ? double(n_drafted) / double(n_drafting_steps) : 0.0; }
  double mean_accepted_depth() const { return n_drafting_steps ? double(n_accepted) / double(n_drafting_steps) : 0.0; }
  // P(depth k accepted | the draft reached depth k), k = 1.. (index k-1).
  std::vector<double> acceptance_by_position() const;
};

class SpeculativeDecoder {
 public:
  // target: the model whose distribution is reproduced; drafter: may be null (plain decoding),
  // not owned, must outlive the decoder. n_ctx: target cache length (0: the model's).
  // Throws Error for invalid config values (naming them).
  SpeculativeDecoder(Transformer& target, Drafter* drafter, const SpecConfig& config = {}, int n_ctx = 0);
  ~SpeculativeDecoder();

  // Starts a sequence whose committed tokens are `prompt` (1 <= size <= n_ctx): prefills the
  // target with all but the last token, reusing the cached prefix shared with the previous
  // sequence, and calls drafter.begin. Resets the Rng from sampling.seed.
  // Cost: one forward over the uncached prompt tokens (in chunks).
  void begin(std::span<const Token> prompt, const SamplingParams& sampling);

  // One decode step: emits between 1 and n_max_new tokens (>= 1). K is capped so that no
  // position reaches n_ctx and no more than n_max_new tokens come out. Requires tokens().size()
  // < n_ctx (Error otherwise). Cost: draft + one target forward over K + 1 rows (or the tree).
  std::vector<Token> step(int n_max_new);

  // Cuts the committed sequence to its first n_tokens (1 <= n_tokens <= size): a stop string or
  // EOS found inside an accepted run. Target cache, drafter and context stay consistent.
  void rollback(int n_tokens);

  std::span<const Token> tokens() const { return tokens_; }
  int n_ctx() const { return cache_.capacity(); }
  // Tokens step() may still add before the context is full.
  int remaining() const { return n_ctx() - static_cast<int>(tokens_.size()); }
  const StepInfo& last_step() const { return last_step_; }
  // Stats since construction (or reset_stats); derived costs are refreshed on each call.
  const SpecStats& stats();
  void reset_stats();
  const KvCache& target_cache() const { return cache_; }
  const SpecConfig& config() const { return config_; }
  // Feeds a target forward timing to the adaptive rule as if measured (tests use it to simulate
  // a preempted verify forward).
  void observe_verify_timing(int n_rows, double seconds);
  // The adaptive rule's current estimates: verify_cost(n_rows) = t(n_rows) / t(1) of the target
  // (1 when nothing is measured), and whether some K <= draft_max pays at the measured costs
  // ((K + 1) / (K c_draft + verify_cost(K + 1)) > 1). Cost: O(draft_max).
  double estimated_verify_cost(int n_rows) const;
  bool drafting_can_pay() const;

 private:
  int choose_k(int n_max_new);
  void probe_single_row();
  // Shadow drafts (SpecConfig::shadow): propose at a plain step, check against emitted tokens.
  void start_shadow(int n_max);
  int draft_units(int n_proposed);  // proposed + caught-up tokens of a proposal (for c_draft)
  void check_shadow(Token emitted);
  void observe_path(const Draft& draft, const std::vector<int32_t>& path);
  SparseDist target_row(const Logits& logits, int row, std::span<const Token> path) const;

  Transformer& target_;
  Drafter* drafter_;
  SpecConfig config_;
  KvCache cache_;                 // target K/V of tokens_[0 .. size-1) (the last is not cached)
  std::vector<Token> tokens_;     // (n_committed) prompt + emitted tokens
  SamplingParams sampling_;
  Rng rng_;
  std::unique_ptr<DraftLengthController> controller_;
  int steps_since_probe_ = 0;     // steps since the last 1-row target forward
  bool want_shadow_ = false;      // choose_k: this plain step should carry a shadow draft
  bool shadow_mode_ = false;      // the drafter is cheap enough for shadow drafts (prior 0)
  bool shadow_decided_ = false;   // shadow_mode_ was set from a measurement
  int shadow_wait_ = 0;           // plain steps to let pass before the next shadow
  int shadow_backoff_ = 1;        // spacing after shadows failing at their first token
  int steps_since_draft_ = 0;     // plain steps since the last verified draft
  int explore_wait_ = 8;          // plain steps before an exploring draft (kExploreMin..kExploreInterval)
  bool exploring_ = false;        // choose_k: this step's draft explores (the estimates chose K = 0)
  int steps_since_cost_probe_ = 0;  // steps since the last cost probe (an extra discarded row)
  bool want_cost_probe_ = false;  // choose_k: this plain step should carry a cost probe row
  int drafter_seen_ = 0;          // committed tokens the drafter had seen at its last proposal
  Draft shadow_;                  // pending shadow draft (empty: none)
  std::vector<int32_t> shadow_path_;  // (depth matched so far) nodes of shadow_ matched by emitted tokens
  StepInfo last_step_;
  SpecStats stats_;
  std::vector<int64_t> verify_rows_count_;  // (max rows) verify passes by row count, for verify_cost
  // Features (Drafter::wants_features): hand features_ to the drafter before a proposal.
  bool wants_features() const { return drafter_ != nullptr && drafter_->wants_features(); }
  void share_features();
  Batch batch_;                   // scratch
  Logits logits_;                 // scratch (n_rows, n_vocab)
  // Appends row `row` of features_out_ to features_ as [residual layers.., final].
  void append_feature_row(int row);
  Features features_out_;         // scratch (n_rows, n_embd) when the drafter wants features
  int feature_width_ = 0;         // floats per row of features_: (feature layers + 1) * n_embd
  std::vector<float> features_;   // (cache_.size(), feature_width_) target features of the cached tokens, or empty
};

}  // namespace specdec
