// server/scheduler.cpp — see scheduler.h.
#include "server/scheduler.h"

#include <algorithm>
#include <cstdio>

#include "server/metrics.h"
#include "specdec/draft_model.h"
#include "specdec/error.h"
#include "specdec/timer.h"

namespace specdec::server {

Scheduler::Scheduler(Engine& engine, const SchedulerOptions& options, Metrics* metrics)
    : engine_(engine), options_(options), metrics_(metrics), k_controller_(options.probe_interval) {
  if (options.n_slots < 1) throw Error("--parallel " + std::to_string(options.n_slots) + " must be >= 1");
  if (options.queue_max < 0) throw Error("--queue " + std::to_string(options.queue_max) + " must be >= 0");
  for (int i = 0; i < options.n_slots; ++i) slots_.push_back(std::make_unique<Slot>(i, engine));
  if (options.batch_drafts && engine.draft_model()) batched_draft_ = std::make_unique<BatchedDraft>(*engine.draft_model());
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  const double now = now_seconds();
  for (auto& slot : slots_) slot->abort("cancelled", "server shutting down", now);
  for (auto& job : queue_) {
    JobResult result;
    result.finish_reason = "cancelled";
    result.error = "server shutting down";
    job->finish(std::move(result));
  }
}

bool Scheduler::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || static_cast<int>(queue_.size()) >= options_.queue_max) return false;
    job->submitted_at = now_seconds();
    queue_.push_back(job);
  }
  wake_.notify_all();
  return true;
}

int Scheduler::queue_length() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(queue_.size());
}

int Scheduler::busy_slots() const {
  std::lock_guard lock(mutex_);
  return n_busy_;
}

int Scheduler::current_k() const {
  std::lock_guard lock(mutex_);
  return current_k_;
}

void Scheduler::admit(double now) {
  std::unique_lock lock(mutex_);
  // Drop cancelled and timed-out jobs anywhere in the queue (they no longer count against it).
  std::vector<std::shared_ptr<Job>> dropped;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if ((*it)->cancelled() || now > (*it)->deadline()) {
      dropped.push_back(*it);
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  lock.unlock();
  for (auto& job : dropped) {
    JobResult result;
    result.finish_reason = job->cancelled() ? "cancelled" : "length";
    result.timed_out = !job->cancelled();
    result.error = job->cancelled() ? "client went away" : "timed out waiting for a slot";
    result.queue_seconds = now - job->submitted_at;
    result.n_prompt = static_cast<int>(job->request().prompt.size());
    job->finish(std::move(result));
  }
  lock.lock();
  while (!queue_.empty()) {
    std::shared_ptr<Job> job = queue_.front();
    // The free slot that shares the longest cached prefix (multi-turn chat), else the least
    // recently used one.
    Slot* best = nullptr;
    size_t best_prefix = 0;
    for (auto& slot : slots_) {
      if (slot->busy()) continue;
      const size_t prefix = slot->shared_prefix(job->request().prompt);
      if (!best || prefix > best_prefix || (prefix == best_prefix && slot->last_used < best->last_used)) {
        best = slot.get();
        best_prefix = prefix;
      }
    }
    if (!best) return;
    queue_.pop_front();
    ++n_busy_;
    lock.unlock();
    try {
      best->start(job, now);
    } catch (const std::exception& e) {
      JobResult result;
      result.finish_reason = "error";
      result.error = e.what();
      job->finish(std::move(result));
      lock.lock();
      --n_busy_;
      continue;
    }
    lock.lock();
  }
}

void Scheduler::expire(double now) {
  for (auto& slot : slots_) {
    if (!slot->busy()) continue;
    const auto& job = slot->job();
    if (job->cancelled()) {
      slot->abort("cancelled", "client went away", now);
    } else if (now > job->deadline()) {
      slot->abort("length", "", now, /*timed_out=*/true);
    } else {
      continue;
    }
    std::lock_guard lock(mutex_);
    --n_busy_;
  }
}

void Scheduler::fail_all_busy(const std::string& error) {
  const double now = now_seconds();
  for (auto& slot : slots_) {
    if (!slot->busy()) continue;
    slot->abort("error", error, now);
    std::lock_guard lock(mutex_);
    --n_busy_;
  }
}

int Scheduler::draft_all(const std::vector<Slot*>& decoding, int k_batch, double* seconds) {
  int n_drafted = 0;
  std::vector<BatchedDraft::Job> jobs;  // (n_batched) draft-model chains, drafted together
  std::vector<Slot*> job_slots;         // (n_batched)
  int64_t model_forwards = 0, model_rows = 0;
  double model_seconds = 0.0;
  bool model_drafted = false;
  for (Slot* s : decoding) {
    const int k = s->adaptive() ? std::clamp(k_batch, s->k_floor(), s->k_limit()) : s->k_limit();
    if (DraftModelDrafter* d = k > 0 && batched_draft_ ? batched_draft_->batchable(s->drafter()) : nullptr) {
      jobs.push_back({d, s->context(), k, &s->sampling()});
      job_slots.push_back(s);
      continue;
    }
    // Everything else proposes alone (lookup, n-gram, hybrid, heads, draft trees; K = 0: none).
    const auto* alone = dynamic_cast<const DraftModelDrafter*>(s->drafter());
    const int64_t forwards0 = alone ? alone->forwards() : 0, rows0 = alone ? alone->forwarded_rows() : 0;
    n_drafted += s->propose(k);
    *seconds += s->last_draft_seconds();
    if (alone && k > 0) {
      model_drafted = true;
      model_forwards += alone->forwards() - forwards0;
      model_rows += alone->forwarded_rows() - rows0;
      model_seconds += s->last_draft_seconds();
    }
  }
  if (!jobs.empty()) {
    const int64_t forwards0 = batched_draft_->forwards(), rows0 = batched_draft_->rows();
    const double t0 = now_seconds();
    std::vector<Draft> drafts = batched_draft_->propose(jobs);  // (n_batched)
    const double elapsed = now_seconds() - t0;
    for (size_t i = 0; i < jobs.size(); ++i)
      n_drafted += job_slots[i]->set_draft(std::move(drafts[i]), jobs[i].n_max, elapsed / static_cast<double>(jobs.size()));
    *seconds += elapsed;
    model_drafted = true;
    model_forwards += batched_draft_->forwards() - forwards0;
    model_rows += batched_draft_->rows() - rows0;
    model_seconds += elapsed;
  }
  if (metrics_ && model_drafted) metrics_->record_draft(model_forwards, model_rows, model_seconds);
  return n_drafted;
}

void Scheduler::iterate() {
  std::vector<Slot*> decoding, prefilling;
  for (auto& slot : slots_) {
    if (slot->phase() == Slot::Phase::Decode) decoding.push_back(slot.get());
    if (slot->phase() == Slot::Phase::Prefill) prefilling.push_back(slot.get());
  }
  if (decoding.empty() && prefilling.empty()) return;

  // Draft length for this batch: the load-aware choice, within each request's bounds.
  int k_max = 0;
  bool any_adaptive = false;
  for (Slot* s : decoding) {
    k_max = std::max(k_max, s->k_limit());
    any_adaptive = any_adaptive || s->adaptive();
  }
  const int k_batch = any_adaptive ? k_controller_.choose(static_cast<int>(decoding.size()), k_max) : k_max;
  {
    std::lock_guard lock(mutex_);
    current_k_ = k_batch;
  }

  double draft_seconds = 0.0;
  const int n_drafted_tokens = draft_all(decoding, k_batch, &draft_seconds);
  batch_.clear();
  std::vector<KvCache*> caches;     // (n_seqs) indexed by batch.seq
  std::vector<int> first_logits;    // (n_decoding) index of each decoding slot's first logits row
  int n_logit_rows = 0;
  for (Slot* s : decoding) {
    first_logits.push_back(n_logit_rows);
    n_logit_rows += s->add_verify_rows(batch_, static_cast<int>(caches.size()));
    caches.push_back(&s->cache());
  }
  if (n_drafted_tokens > 0) k_controller_.observe_draft(n_drafted_tokens, draft_seconds);
  const int n_decode_rows = batch_.size();
  std::vector<int> prefill_rows;    // (n_prefilling)
  int budget = std::max(options_.prefill_chunk - n_decode_rows, 16);
  for (Slot* s : prefilling) {
    const int n = s->add_prefill_rows(batch_, static_cast<int>(caches.size()), budget);
    caches.push_back(&s->cache());
    prefill_rows.push_back(n);
    budget = std::max(budget - n, 0);
  }

  const double t0 = now_seconds();
  engine_.target().forward(batch_, caches, logits_);
  const double seconds = now_seconds() - t0;
  if (prefilling.empty() && !decoding.empty()) k_controller_.observe_forward(batch_.size(), seconds);
  if (metrics_) metrics_->record_iteration(batch_.size(), static_cast<int>(decoding.size()), k_batch, seconds);

  const double now = now_seconds();
  for (size_t i = 0; i < decoding.size(); ++i) {
    const auto [n_drafted, n_accepted] = decoding[i]->complete_step(logits_, first_logits[i], now);
    if (n_drafted > 0) k_controller_.observe_acceptance(n_drafted, n_accepted);
    if (!decoding[i]->busy()) {
      std::lock_guard lock(mutex_);
      --n_busy_;
    }
  }
  for (size_t i = 0; i < prefilling.size(); ++i) prefilling[i]->prefill_done(prefill_rows[i]);
}

void Scheduler::run() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, std::chrono::milliseconds(50), [&] { return stopping_ || !queue_.empty() || n_busy_ > 0; });
      if (stopping_) return;
    }
    const double now = now_seconds();
    expire(now);
    admit(now);
    try {
      iterate();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "scheduler: batch failed: %s\n", e.what());
      fail_all_busy(std::string("internal error: ") + e.what());
    }
  }
}

}  // namespace specdec::server
