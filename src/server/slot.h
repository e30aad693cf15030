// server/slot.h — one decoding sequence of the server: its own target KV cache, drafters and
// committed tokens, driven by the scheduler one batched forward at a time.
//
// A slot runs the same loop as SpeculativeDecoder::step + Engine::generate, split around the
// forward so that several slots share one target forward (their rows side by side in one
// Batch, each with its own cache):
//   start(job)          reuse the cached prefix shared with the slot's previous sequence
//   add_prefill_rows    the uncached prompt, in chunks (no logits)
//   propose(k)          draft up to k tokens (k = 0: plain step)
//   add_verify_rows     [last token, draft nodes...] with logits
//   complete_step       acceptance on this slot's logit rows, KV rollback, stop strings,
//                       streamed text and logprobs; finishes the job when it is done.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <vector>

#include "server/job.h"
#include "specdec/text_stream.h"
#include "specdec/drafter.h"
#include "specdec/engine.h"
#include "specdec/model.h"
#include "specdec/rng.h"

namespace specdec::server {

class Slot {
 public:
  enum class Phase { Idle, Prefill, Decode };

  // engine: owns the target, tokenizer and draft model; must outlive the slot.
  Slot(int index, Engine& engine);
  ~Slot();

  int index() const { return index_; }
  Phase phase() const { return phase_; }
  bool busy() const { return job_ != nullptr; }
  const std::shared_ptr<Job>& job() const { return job_; }
  double last_used = 0.0;  // now_seconds() when the slot last finished a job

  // Prompt tokens whose K/V this slot could reuse for `prompt`.
  size_t shared_prefix(std::span<const Token> prompt) const;

  // Takes a job (requires !busy()). Throws Error when the request's drafter cannot be built.
  // Cost: the drafter's begin() (a draft model prefills its own cache).
  void start(std::shared_ptr<Job> job, double now);

  // Prefill: appends up to `budget` uncached prompt rows for sequence `seq`; returns how many.
  int add_prefill_rows(Batch& batch, int seq, int budget);
  // After the forward that carried them.
  void prefill_done(int n_rows);

  // Decode: the K this request allows now: min(draft_max, context and max_tokens room); 0 for
  // plain decoding. draft_min() is its lower bound (capped the same way).
  int k_limit() const;
  int k_floor() const;
  bool adaptive() const;
  // Drafts up to k nodes (k <= k_limit()) with this slot's own drafter. Returns the number of
  // nodes proposed.
  int propose(int k);
  // Or: this step's draft made elsewhere (BatchedDraft, with drafter() and context()) in
  // `seconds`; validated like propose()'s. Returns the number of nodes.
  int set_draft(Draft draft, int k, double seconds);
  double last_draft_seconds() const { return last_draft_seconds_; }
  Drafter* drafter() const { return drafter_; }                 // this request's (null: plain)
  std::span<const Token> context() const { return tokens_; }    // committed tokens
  const SamplingParams& sampling() const { return job_->request().sampling; }
  // Appends [last token, draft nodes...] for sequence `seq`, all with logits; returns the count.
  int add_verify_rows(Batch& batch, int seq);
  // After the forward: first_logits = index in `logits` of this slot's first verify row.
  // Returns (n_drafted, n_accepted) of this step for the load-aware controller.
  std::pair<int, int> complete_step(const Logits& logits, int first_logits, double now);

  // Ends the job early: the client went away, it timed out, or the step failed.
  void abort(const std::string& finish_reason, const std::string& error, double now, bool timed_out = false);

  KvCache& cache() { return cache_; }

 private:
  Drafter* drafter_for(SpecMethod method);
  SparseDist target_row(const Logits& logits, int row, std::span<const Token> path) const;
  TokenLogprob logprob_of(const Logits& logits, int row, Token token) const;
  void rollback(int n_tokens);
  void finish(const std::string& finish_reason, double now);

  const int index_;
  Engine& engine_;
  Transformer& target_;
  const Tokenizer& tokenizer_;
  KvCache cache_;                          // (n_layers, n_ctx, kv_dim) target K/V of tokens_[0, size-1)
  std::vector<Token> tokens_;              // (n_committed) prompt + generated
  std::map<SpecMethod, std::unique_ptr<Drafter>> drafters_;  // built on first use
  Drafter* drafter_ = nullptr;             // this request's (null: plain)

  std::shared_ptr<Job> job_;
  Phase phase_ = Phase::Idle;
  int prefill_pos_ = 0, prefill_end_ = 0;  // uncached prompt rows [pos, end) still to forward
  Rng rng_;
  std::unique_ptr<TextStream> text_;
  JobResult result_;
  std::vector<TokenLogprob> pending_logprobs_;  // not yet sent with a text event
  Draft draft_;                            // this step's proposal
  double last_draft_seconds_ = 0.0;
  double started_at_ = 0.0, decode_started_at_ = 0.0;
};

}  // namespace specdec::server
