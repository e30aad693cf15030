// server/slot.cpp — see slot.h. The acceptance, KV rollback and stop handling mirror
// SpeculativeDecoder::step and Engine::generate, so a greedy request gives exactly the tokens
// (and text) of `specdec generate`.
#include "server/slot.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "specdec/acceptance.h"
#include "specdec/error.h"
#include "specdec/timer.h"

namespace specdec::server {

Slot::Slot(int index, Engine& engine)
    : index_(index),
      engine_(engine),
      target_(engine.target()),
      tokenizer_(engine.tokenizer()),
      cache_(engine.target().new_cache(engine.n_ctx())) {}

Slot::~Slot() = default;

size_t Slot::shared_prefix(std::span<const Token> prompt) const {
  if (prompt.empty()) return 0;
  return std::min({common_prefix_length(tokens_, prompt), static_cast<size_t>(cache_.size()), prompt.size() - 1});
}

Drafter* Slot::drafter_for(SpecMethod method) {
  if (method == SpecMethod::None) return nullptr;
  auto& drafter = drafters_[method];
  if (drafter) return drafter.get();
  drafter = engine_.make_drafter(method);
  return drafter.get();
}

void Slot::start(std::shared_ptr<Job> job, double now) {
  SPECDEC_CHECK(!busy(), "slot " + std::to_string(index_) + " is busy");
  const JobRequest& request = job->request();
  SPECDEC_CHECK(!request.prompt.empty() && static_cast<int>(request.prompt.size()) < cache_.capacity(),
                "prompt size " + std::to_string(request.prompt.size()));
  drafter_ = drafter_for(request.spec.method);
  job_ = std::move(job);
  started_at_ = now;
  result_ = JobResult{};
  result_.n_prompt = static_cast<int>(request.prompt.size());
  result_.method = drafter_ ? spec_method_name(request.spec.method) : "none";
  result_.queue_seconds = now - job_->submitted_at;
  pending_logprobs_.clear();
  rng_ = Rng(request.sampling.seed);
  text_ = std::make_unique<TextStream>(tokenizer_, request.stop, request.resume_text);

  // Keep the cached prefix shared with the previous sequence (bit-identical by batch invariance).
  const size_t n_keep = shared_prefix(request.prompt);
  cache_.truncate(static_cast<int>(n_keep));
  tokens_.assign(request.prompt.begin(), request.prompt.end());
  result_.n_cached = static_cast<int>(n_keep);
  prefill_pos_ = static_cast<int>(n_keep);
  prefill_end_ = static_cast<int>(request.prompt.size()) - 1;
  if (drafter_) {
    drafter_->set_p_min(request.spec.p_min);
    drafter_->begin(request.prompt);
  }
  phase_ = prefill_pos_ < prefill_end_ ? Phase::Prefill : Phase::Decode;
  if (phase_ == Phase::Decode) decode_started_at_ = now_seconds();
}

int Slot::add_prefill_rows(Batch& batch, int seq, int budget) {
  const int n = std::min(budget, prefill_end_ - prefill_pos_);
  const int base = batch.size();
  for (int i = 0; i < n; ++i)
    batch.add(tokens_[static_cast<size_t>(prefill_pos_ + i)], prefill_pos_ + i, i == 0 ? -1 : base + i - 1, seq, false);
  return n;
}

void Slot::prefill_done(int n_rows) {
  prefill_pos_ += n_rows;
  if (prefill_pos_ >= prefill_end_) {
    phase_ = Phase::Decode;
    decode_started_at_ = now_seconds();
    result_.prefill_seconds = decode_started_at_ - started_at_;
  }
}

int Slot::k_limit() const {
  if (!drafter_) return 0;
  const JobRequest& request = job_->request();
  const int n = static_cast<int>(tokens_.size());
  const int remaining = cache_.capacity() - n;
  const int n_max_new = std::min(request.max_tokens - result_.n_generated, remaining);
  return std::max(0, std::min({request.spec.draft_max, cache_.capacity() - n - 1, n_max_new - 1}));
}

int Slot::k_floor() const { return drafter_ ? std::min(job_->request().spec.draft_min, k_limit()) : 0; }

bool Slot::adaptive() const { return job_->request().spec.adaptive; }

int Slot::propose(int k) {
  draft_.clear();
  last_draft_seconds_ = 0.0;
  if (!drafter_ || k <= 0) return 0;
  const double t0 = now_seconds();
  Draft draft = drafter_->propose(tokens_, k, job_->request().sampling);
  return set_draft(std::move(draft), k, now_seconds() - t0);
}

int Slot::set_draft(Draft draft, int k, double seconds) {
  SPECDEC_CHECK(drafter_ || draft.empty(), "slot " + std::to_string(index_) + ": a draft without a drafter");
  draft_ = std::move(draft);
  last_draft_seconds_ = seconds;
  if (draft_.empty()) return 0;
  validate_draft(draft_);
  if (draft_.size() > k)
    throw Error("drafter " + drafter_->name() + " proposed " + std::to_string(draft_.size()) + " nodes, more than " +
                std::to_string(k));
  for (Token t : draft_.tokens)
    if (t < 0 || t >= target_.config().n_vocab)
      throw Error("drafter " + drafter_->name() + " proposed token id " + std::to_string(t) +
                  " outside the target vocabulary of " + std::to_string(target_.config().n_vocab));
  return draft_.size();
}

int Slot::add_verify_rows(Batch& batch, int seq) {
  const int n = static_cast<int>(tokens_.size());
  const int base = batch.size();
  const std::vector<int32_t> depth = node_depths(draft_);  // (n_nodes)
  batch.add(tokens_.back(), n - 1, -1, seq, true);
  for (int i = 0; i < draft_.size(); ++i) {
    const int32_t parent = draft_.parent[static_cast<size_t>(i)];
    batch.add(draft_.tokens[static_cast<size_t>(i)], n - 1 + depth[static_cast<size_t>(i)], base + parent + 1, seq,
              true);
  }
  return 1 + draft_.size();
}

SparseDist Slot::target_row(const Logits& logits, int row, std::span<const Token> path) const {
  const SamplingParams& sampling = job_->request().sampling;
  size_t n_tail = tokens_.size();
  if (sampling.repeat_last_n >= 0) n_tail = std::min(n_tail, static_cast<size_t>(sampling.repeat_last_n));
  std::vector<Token> history(tokens_.end() - static_cast<std::ptrdiff_t>(n_tail), tokens_.end());
  history.insert(history.end(), path.begin(), path.end());
  return make_distribution(std::span<const float>(logits.row(row), static_cast<size_t>(logits.n_vocab)), sampling,
                           history);
}

TokenLogprob Slot::logprob_of(const Logits& logits, int row, Token token) const {
  const float* x = logits.row(row);  // (n_vocab)
  const int n_vocab = logits.n_vocab;
  const float max_logit = *std::max_element(x, x + n_vocab);
  double sum = 0.0;
  for (int i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(x[i] - max_logit));
  const double log_z = static_cast<double>(max_logit) + std::log(sum);
  TokenLogprob out;
  out.token = token;
  out.text = tokenizer_.token_to_piece(token);
  out.logprob = static_cast<float>(x[token] - log_z);
  const int n_top = std::min(job_->request().n_logprobs, n_vocab);
  if (n_top > 0) {
    std::vector<int> ids(static_cast<size_t>(n_vocab));  // (n_vocab)
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + n_top, ids.end(), [&](int a, int b) {
      return x[a] > x[b] || (x[a] == x[b] && a < b);
    });
    for (int i = 0; i < n_top; ++i) {
      const Token id = ids[static_cast<size_t>(i)];
      out.top.push_back({id, tokenizer_.token_to_piece(id), static_cast<float>(x[id] - log_z)});
    }
  }
  return out;
}

void Slot::rollback(int n_tokens) {
  tokens_.resize(static_cast<size_t>(n_tokens));
  cache_.truncate(std::min(cache_.size(), n_tokens - 1));
  if (drafter_) drafter_->rollback(n_tokens);
}

std::pair<int, int> Slot::complete_step(const Logits& logits, int first_logits, double now) {
  const JobRequest& request = job_->request();
  const int n = static_cast<int>(tokens_.size());
  const TargetRow rows = [&](int row) {
    return target_row(logits, first_logits + row,
                      row == 0 ? std::vector<Token>{} : path_tokens(draft_, row - 1));
  };
  Verdict verdict;
  if (request.sampling.greedy()) {
    verdict = accept_greedy(draft_, rows);
  } else {
    verdict = accept_sampling(draft_, rows, rng_, AcceptOptions{});
  }
  const int n_accepted = verdict.n_accepted();

  // Target KV: keep the last token's row and the accepted path, contiguous.
  bool prefix_chain = true;
  for (int i = 0; i < n_accepted; ++i) prefix_chain = prefix_chain && verdict.path[static_cast<size_t>(i)] == i;
  if (prefix_chain) {
    cache_.truncate(n + n_accepted);
  } else {
    std::vector<int> keep = {0};
    for (int node : verdict.path) keep.push_back(node + 1);
    cache_.keep_rows(n - 1, keep);
  }
  if (drafter_ && draft_.size() > 0) drafter_->accept(draft_, verdict);

  // Statistics (as SpecStats counts them).
  int max_depth = 0;
  for (int d : node_depths(draft_)) max_depth = std::max(max_depth, d);
  ++result_.n_target_passes;
  result_.n_drafted += draft_.size();
  result_.n_accepted += n_accepted;
  if (result_.drafted_by_pos.size() < static_cast<size_t>(max_depth)) {
    result_.drafted_by_pos.resize(static_cast<size_t>(max_depth), 0);
    result_.accepted_by_pos.resize(static_cast<size_t>(max_depth), 0);
  }
  for (int d = 1; d <= max_depth; ++d) {
    ++result_.drafted_by_pos[static_cast<size_t>(d - 1)];
    if (d <= n_accepted) ++result_.accepted_by_pos[static_cast<size_t>(d - 1)];
  }

  // Commit, then cut at end-of-generation / stop strings / max_tokens inside the accepted run.
  std::vector<Token> emitted;
  std::vector<int> emitted_row;  // (n_emitted) verify row that predicted each emitted token
  for (size_t i = 0; i < verdict.path.size(); ++i) {
    emitted.push_back(draft_.tokens[static_cast<size_t>(verdict.path[i])]);
    emitted_row.push_back(i == 0 ? 0 : verdict.path[i - 1] + 1);
  }
  emitted.push_back(verdict.next);
  emitted_row.push_back(verdict.path.empty() ? 0 : verdict.path.back() + 1);
  tokens_.insert(tokens_.end(), emitted.begin(), emitted.end());
  if (result_.n_generated == 0) result_.ttft_seconds = now - job_->submitted_at;

  std::string released;
  std::string finish_reason;
  size_t n_kept = emitted.size();
  for (size_t i = 0; i < emitted.size(); ++i) {
    ++result_.n_generated;
    if (request.n_logprobs >= 0) {
      pending_logprobs_.push_back(logprob_of(logits, first_logits + emitted_row[i], emitted[i]));
      result_.logprobs.push_back(pending_logprobs_.back());
    }
    if (text_->push(emitted[i], &released)) {
      finish_reason = "stop";
    } else if (result_.n_generated >= request.max_tokens) {
      finish_reason = "length";
    }
    if (!finish_reason.empty()) {
      n_kept = i + 1;
      break;
    }
  }
  if (n_kept < emitted.size()) rollback(static_cast<int>(tokens_.size() - (emitted.size() - n_kept)));
  if (finish_reason.empty() && static_cast<int>(tokens_.size()) >= cache_.capacity()) finish_reason = "length";
  if (!finish_reason.empty()) text_->finish(&released);
  if (!released.empty() || !pending_logprobs_.empty()) {
    job_->push_text(std::move(released), std::move(pending_logprobs_));
    pending_logprobs_.clear();
  }
  const std::pair<int, int> step{draft_.size() > 0 ? max_depth : 0, n_accepted};
  if (!finish_reason.empty()) finish(finish_reason, now);
  return step;
}

void Slot::finish(const std::string& finish_reason, double now) {
  result_.finish_reason = finish_reason;
  result_.text = text_->text();
  if (phase_ == Phase::Decode) result_.decode_seconds = now - decode_started_at_;
  job_->finish(std::move(result_));
  job_.reset();
  drafter_ = nullptr;
  text_.reset();
  phase_ = Phase::Idle;
  last_used = now;
}

void Slot::abort(const std::string& finish_reason, const std::string& error, double now, bool timed_out) {
  if (!job_) return;
  result_.error = error;
  result_.timed_out = timed_out;
  if (phase_ == Phase::Prefill) {
    // The cache holds a consistent prefix of the prompt: keep it for reuse.
    tokens_.resize(static_cast<size_t>(prefill_pos_) + 1);
    cache_.truncate(std::min(cache_.size(), prefill_pos_));
  }
  finish(finish_reason, now);
}

}  // namespace specdec::server
