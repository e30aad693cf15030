// server/job.h — one accepted request as the scheduler sees it, and the channel through which
// its text, logprobs and final result flow back to the HTTP thread that waits for it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "specdec/model_free.h"
#include "specdec/sampling.h"

namespace specdec::server {

// Per-request speculation settings (the server default, overridden by the `speculative` field).
struct SpecSettings {
  SpecMethod method = SpecMethod::None;  // None: plain decoding
  int draft_max = 8;
  int draft_min = 0;
  float p_min = 0.0f;
  bool adaptive = true;                  // false: K = draft_max (load-aware choice off)
};

// What a slot needs to run a request (validated and tokenized by the HTTP thread).
struct JobRequest {
  std::vector<Token> prompt;             // (n_prompt) with BOS as the vocabulary says
  int max_tokens = 16;                   // >= 1
  SamplingParams sampling;
  std::vector<std::string> stop;         // non-empty strings
  SpecSettings spec;
  int n_logprobs = -1;                   // -1: none; 0..20: chosen token + that many alternatives
  bool resume_text = true;               // generated text continues the prompt's text (keep its leading space)
};

struct TopLogprob {
  Token token = -1;
  std::string text;
  float logprob = 0.0f;
};

// Log-probability of one generated token under the target model (temperature 1, no truncation).
struct TokenLogprob {
  Token token = -1;
  std::string text;                      // the token's bytes (may be a partial UTF-8 sequence)
  float logprob = 0.0f;
  std::vector<TopLogprob> top;           // (n_logprobs) most probable tokens at that position
};

struct JobResult {
  std::string text;                      // generated text, stop string excluded
  std::string finish_reason;             // "stop" | "length" | "cancelled" | "error"
  std::string error;                     // for finish_reason "error"
  int n_prompt = 0, n_cached = 0, n_generated = 0;
  bool timed_out = false;
  std::string method;                    // speculation used ("none" for plain)
  int64_t n_drafted = 0, n_accepted = 0, n_target_passes = 0;
  std::vector<int64_t> drafted_by_pos, accepted_by_pos;  // (max depth) as in SpecStats
  double queue_seconds = 0, prefill_seconds = 0, ttft_seconds = 0, decode_seconds = 0;
  std::vector<TokenLogprob> logprobs;    // (n_generated) when asked for
};

struct JobEvent {
  enum class Kind { Text, Done } kind = Kind::Text;
  std::string text;                      // Text: released UTF-8 text (may be empty with logprobs)
  std::vector<TokenLogprob> logprobs;    // logprobs of the tokens since the previous event
};

class Job {
 public:
  Job(uint64_t id, JobRequest request, double deadline_seconds)
      : id_(id), request_(std::move(request)), deadline_(deadline_seconds) {}

  uint64_t id() const { return id_; }
  const JobRequest& request() const { return request_; }
  double deadline() const { return deadline_; }       // now_seconds() after which it times out
  double submitted_at = 0.0;                          // now_seconds() at submission

  // HTTP side: the client went away (or gave up); the scheduler frees the slot soon after.
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

  // Scheduler side.
  void push_text(std::string text, std::vector<TokenLogprob> logprobs) {
    std::lock_guard lock(mutex_);
    events_.push_back(JobEvent{JobEvent::Kind::Text, std::move(text), std::move(logprobs)});
    ready_.notify_all();
  }
  void finish(JobResult result) {
    std::lock_guard lock(mutex_);
    result_ = std::move(result);
    events_.push_back(JobEvent{JobEvent::Kind::Done, {}, {}});
    ready_.notify_all();
  }

  // HTTP side: the next event, waiting at most `timeout`; nullopt on timeout.
  std::optional<JobEvent> wait_event(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!ready_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
    JobEvent event = std::move(events_.front());
    events_.pop_front();
    return event;
  }
  // Valid after a Done event.
  const JobResult& result() const { return result_; }

 private:
  const uint64_t id_;
  const JobRequest request_;
  const double deadline_;
  std::atomic<bool> cancelled_{false};
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<JobEvent> events_;
  JobResult result_;
};

}  // namespace specdec::server
