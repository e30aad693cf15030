// server/metrics.cpp — see metrics.h.
#include "server/metrics.h"

#include <cstdio>

namespace specdec::server {

namespace {

const std::vector<double> kLatencyBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                            0.25,  0.5,    1.0,   2.5,  5.0,   10.0, 30.0};

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void header(std::string* out, const char* name, const char* type, const char* help) {
  *out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(const std::string& name, std::string* out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? number(bounds_[i]) : "+Inf";
    *out += name + "_bucket{le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  *out += name + "_sum " + number(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics() : ttft_(kLatencyBounds), tpot_(kLatencyBounds), queue_wait_(kLatencyBounds) {}

void Metrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[{endpoint, status}];
}

void Metrics::count_error(const std::string& kind) {
  std::lock_guard lock(mutex_);
  ++errors_[kind];
}

void Metrics::record_job(const JobResult& r) {
  std::lock_guard lock(mutex_);
  ++finishes_[r.finish_reason];
  prompt_tokens_ += static_cast<uint64_t>(r.n_prompt);
  cached_prompt_tokens_ += static_cast<uint64_t>(r.n_cached);
  generated_tokens_ += static_cast<uint64_t>(r.n_generated);
  drafted_ += static_cast<uint64_t>(r.n_drafted);
  accepted_ += static_cast<uint64_t>(r.n_accepted);
  target_passes_ += static_cast<uint64_t>(r.n_target_passes);
  if (drafted_by_pos_.size() < r.drafted_by_pos.size()) {
    drafted_by_pos_.resize(r.drafted_by_pos.size(), 0);
    accepted_by_pos_.resize(r.drafted_by_pos.size(), 0);
  }
  for (size_t k = 0; k < r.drafted_by_pos.size(); ++k) {
    drafted_by_pos_[k] += static_cast<uint64_t>(r.drafted_by_pos[k]);
    accepted_by_pos_[k] += static_cast<uint64_t>(r.accepted_by_pos[k]);
  }
  queue_wait_.observe(r.queue_seconds);
  if (r.n_generated > 0) {
    ttft_.observe(r.ttft_seconds);
    if (r.n_generated > 1) tpot_.observe(r.decode_seconds / r.n_generated);
  }
}

void Metrics::record_draft(int64_t n_forwards, int64_t n_rows, double seconds) {
  std::lock_guard lock(mutex_);
  ++draft_iterations_;
  draft_forwards_ += static_cast<uint64_t>(n_forwards);
  draft_rows_ += static_cast<uint64_t>(n_rows);
  draft_seconds_ += seconds;
}

void Metrics::record_iteration(int n_rows, int n_decoding, int k, double seconds) {
  std::lock_guard lock(mutex_);
  (void)k;
  ++iterations_;
  forward_rows_ += static_cast<uint64_t>(n_rows);
  forward_seconds_ += seconds;
  last_rows_ = n_rows;
  last_decoding_ = n_decoding;
}

std::string Metrics::render(const SchedulerGauges& g) const {
  std::lock_guard lock(mutex_);
  std::string out;
  header(&out, "specdec_requests_total", "counter", "HTTP requests answered, by endpoint and status code.");
  for (const auto& [key, n] : requests_)
    out += "specdec_requests_total{endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " +
           std::to_string(n) + "\n";
  header(&out, "specdec_errors_total", "counter", "Failed requests by kind.");
  for (const char* kind : {"bad_request", "unauthorized", "not_found", "too_large", "queue_full", "timeout",
                           "cancelled", "internal"}) {
    auto it = errors_.find(kind);
    out += std::string("specdec_errors_total{kind=\"") + kind + "\"} " +
           std::to_string(it == errors_.end() ? 0 : it->second) + "\n";
  }
  header(&out, "specdec_generations_total", "counter", "Finished generations by finish reason.");
  for (const auto& [reason, n] : finishes_)
    out += "specdec_generations_total{finish_reason=\"" + reason + "\"} " + std::to_string(n) + "\n";
  header(&out, "specdec_queue_length", "gauge", "Requests waiting for a slot.");
  out += "specdec_queue_length " + std::to_string(g.queue_length) + "\n";
  header(&out, "specdec_slots_busy", "gauge", "Slots running a request.");
  out += "specdec_slots_busy " + std::to_string(g.busy_slots) + "\n";
  header(&out, "specdec_slots_total", "gauge", "Slots (--parallel).");
  out += "specdec_slots_total " + std::to_string(g.n_slots) + "\n";
  header(&out, "specdec_draft_k_current", "gauge", "Draft length K chosen for the current batch (load-aware).");
  out += "specdec_draft_k_current " + std::to_string(g.current_k) + "\n";
  header(&out, "specdec_prompt_tokens_total", "counter", "Prompt tokens received.");
  out += "specdec_prompt_tokens_total " + std::to_string(prompt_tokens_) + "\n";
  header(&out, "specdec_prompt_tokens_cached_total", "counter", "Prompt tokens whose K/V was reused.");
  out += "specdec_prompt_tokens_cached_total " + std::to_string(cached_prompt_tokens_) + "\n";
  header(&out, "specdec_generated_tokens_total", "counter", "Tokens generated.");
  out += "specdec_generated_tokens_total " + std::to_string(generated_tokens_) + "\n";
  header(&out, "specdec_draft_tokens_total", "counter", "Draft tokens verified.");
  out += "specdec_draft_tokens_total " + std::to_string(drafted_) + "\n";
  header(&out, "specdec_draft_tokens_accepted_total", "counter", "Draft tokens accepted.");
  out += "specdec_draft_tokens_accepted_total " + std::to_string(accepted_) + "\n";
  header(&out, "specdec_target_passes_total", "counter", "Per-sequence target verify steps.");
  out += "specdec_target_passes_total " + std::to_string(target_passes_) + "\n";
  header(&out, "specdec_draft_acceptance_by_position", "gauge",
         "P(draft position k accepted | the draft reached position k).");
  for (size_t k = 0; k < drafted_by_pos_.size(); ++k) {
    const double rate = drafted_by_pos_[k] ? double(accepted_by_pos_[k]) / double(drafted_by_pos_[k]) : 0.0;
    out += "specdec_draft_acceptance_by_position{position=\"" + std::to_string(k + 1) + "\"} " + number(rate) + "\n";
  }
  header(&out, "specdec_batch_iterations_total", "counter", "Batched target forwards run by the scheduler.");
  out += "specdec_batch_iterations_total " + std::to_string(iterations_) + "\n";
  header(&out, "specdec_batch_rows_total", "counter", "Rows in those forwards.");
  out += "specdec_batch_rows_total " + std::to_string(forward_rows_) + "\n";
  header(&out, "specdec_batch_forward_seconds_total", "counter", "Time inside those forwards.");
  out += "specdec_batch_forward_seconds_total " + number(forward_seconds_) + "\n";
  header(&out, "specdec_draft_model_iterations_total", "counter", "Scheduler iterations in which the draft model drafted.");
  out += "specdec_draft_model_iterations_total " + std::to_string(draft_iterations_) + "\n";
  header(&out, "specdec_draft_model_forwards_total", "counter",
         "Draft-model forwards in those iterations (one per level when the slots draft in a batch).");
  out += "specdec_draft_model_forwards_total " + std::to_string(draft_forwards_) + "\n";
  header(&out, "specdec_draft_model_rows_total", "counter", "Rows in those draft-model forwards.");
  out += "specdec_draft_model_rows_total " + std::to_string(draft_rows_) + "\n";
  header(&out, "specdec_draft_model_seconds_total", "counter", "Time spent drafting in those iterations.");
  out += "specdec_draft_model_seconds_total " + number(draft_seconds_) + "\n";
  header(&out, "specdec_batch_rows_last", "gauge", "Rows in the last forward.");
  out += "specdec_batch_rows_last " + std::to_string(last_rows_) + "\n";
  header(&out, "specdec_time_to_first_token_seconds", "histogram", "Submission to first generated token.");
  ttft_.render("specdec_time_to_first_token_seconds", &out);
  header(&out, "specdec_time_per_output_token_seconds", "histogram", "Decode time per generated token.");
  tpot_.render("specdec_time_per_output_token_seconds", &out);
  header(&out, "specdec_queue_wait_seconds", "histogram", "Time from submission to a slot.");
  queue_wait_.render("specdec_queue_wait_seconds", &out);
  return out;
}

}  // namespace specdec::server
