// server/metrics.h — counters and histograms behind GET /metrics (Prometheus text format 0.0.4).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "server/job.h"

namespace specdec::server {

// A cumulative histogram with fixed bucket bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // Appends NAME_bucket{le=...}, NAME_sum, NAME_count lines.
  void render(const std::string& name, std::string* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // (n_bounds + 1) last = +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

struct SchedulerGauges {
  int queue_length = 0, busy_slots = 0, n_slots = 0, current_k = 0;
};

class Metrics {
 public:
  Metrics();
  // One HTTP request answered (endpoint path, status code).
  void count_request(const std::string& endpoint, int status);
  // An error by kind: bad_request, unauthorized, not_found, too_large, queue_full, timeout,
  // cancelled, internal.
  void count_error(const std::string& kind);
  // A finished generation.
  void record_job(const JobResult& result);
  // One scheduler iteration: rows in the forward, sequences decoding, the batch K chosen.
  void record_iteration(int n_rows, int n_decoding, int k, double seconds);
  // One scheduler iteration's drafting with the draft model: forwards (shared by the slots
  // when batched), their rows, and the time all drafters took.
  void record_draft(int64_t n_forwards, int64_t n_rows, double seconds);
  std::string render(const SchedulerGauges& gauges) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;  // (endpoint, status) -> count
  std::map<std::string, uint64_t> errors_;                     // kind -> count
  std::map<std::string, uint64_t> finishes_;                   // finish reason -> count
  uint64_t prompt_tokens_ = 0, cached_prompt_tokens_ = 0, generated_tokens_ = 0;
  uint64_t drafted_ = 0, accepted_ = 0, target_passes_ = 0;
  std::vector<uint64_t> drafted_by_pos_, accepted_by_pos_;    // (max depth)
  uint64_t iterations_ = 0, forward_rows_ = 0;
  double forward_seconds_ = 0.0;
  uint64_t draft_forwards_ = 0, draft_rows_ = 0, draft_iterations_ = 0;
  double draft_seconds_ = 0.0;
  int last_rows_ = 0, last_decoding_ = 0;
  Histogram ttft_, tpot_, queue_wait_;
};

}  // namespace specdec::server
