// engine/bench_measure.cpp — the timing primitives of `specdec bench`: forwards of M chain rows
// at a given cache position (median over repeats), the verify cost curve c(M), the speedup
// model of the SIMULATION, the forced-acceptance decode loop, and the process's RSS.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "specdec/bandwidth.h"
#include "specdec/bench.h"
#include "specdec/error.h"
#include "specdec/handoff_latency.h"
#include "specdec/model.h"
#include "specdec/rng.h"
#include "specdec/timer.h"

namespace specdec {

namespace {

double median(std::vector<double> values) {
  SPECDEC_CHECK(!values.empty(), "median of no values");
  return median_of(std::move(values));
}

// Token ids that are not the special ones at the start of the usual vocabularies (<unk>, <s>, </s>).
Token random_token(Rng& rng, int n_vocab) {
  const int first = n_vocab > 8 ? 3 : 0;
  return static_cast<Token>(first + static_cast<int>(rng.below(static_cast<uint64_t>(n_vocab - first))));
}

// A chain of m_rows random tokens at positions context.. (parent = previous row).
Batch chain_batch(int context, int m_rows, int n_vocab, bool all_logits, uint64_t seed) {
  Rng rng(seed);
  Batch batch;
  for (int i = 0; i < m_rows; ++i) {
    const bool logits = all_logits || i == m_rows - 1;
    batch.add(random_token(rng, n_vocab), context + i, i == 0 ? -1 : i - 1, 0, logits);
  }
  return batch;
}

void check_room(const KvCache& cache, int context, int m_rows, const char* what) {
  if (context < 0 || context > cache.size() || m_rows < 1 || context + m_rows > cache.capacity()) {
    throw Error(std::string(what) + ": " + std::to_string(m_rows) + " rows at context " + std::to_string(context) +
                " do not fit a cache holding " + std::to_string(cache.size()) + " of " +
                std::to_string(cache.capacity()) + " positions");
  }
}

// One timed workload: a fixed batch forwarded at a fixed context, `inner` times per repeat.
struct ForwardJob {
  Batch batch;
  int context = 0;
  int inner = 1;
  std::vector<double> samples;  // (reps) seconds per forward

  double run_once(Transformer& model, KvCache& cache, Logits& logits) {
    KvCache* caches[] = {&cache};
    const double t0 = now_seconds();
    for (int i = 0; i < inner; ++i) {
      cache.truncate(context);
      model.forward(batch, caches, logits);
    }
    const double seconds = (now_seconds() - t0) / inner;
    cache.truncate(context);
    return seconds;
  }

  // Warm-up forward (grows scratch buffers, faults weights in) that also picks `inner`.
  void calibrate(Transformer& model, KvCache& cache, Logits& logits, double min_rep_seconds) {
    inner = 1;
    const double once = std::max(run_once(model, cache, logits), 1e-9);
    inner = static_cast<int>(std::clamp(std::ceil(min_rep_seconds / once), 1.0, 100000.0));
  }
};

ForwardJob make_job(const Transformer& model, int context, int m_rows, bool all_logits) {
  ForwardJob job;
  job.context = context;
  job.batch = chain_batch(context, m_rows, model.config().n_vocab, all_logits,
                          0xBE7C4ull + static_cast<uint64_t>(m_rows) * 7919u + static_cast<uint64_t>(context));
  return job;
}

void check_reps(int reps) {
  if (reps < 1) throw Error("bench: repeats " + std::to_string(reps) + " must be >= 1");
}

size_t status_kib(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(key) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) {
      std::istringstream fields(line.substr(prefix.size()));
      size_t kib = 0;
      fields >> kib;
      return kib;
    }
  }
  return 0;
}

}  // namespace

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double time_forward(Transformer& model, KvCache& cache, int context, int m_rows, int reps, double min_rep_seconds) {
  check_reps(reps);
  check_room(cache, context, m_rows, "time_forward");
  ForwardJob job = make_job(model, context, m_rows, /*all_logits=*/true);
  Logits logits;
  job.calibrate(model, cache, logits, min_rep_seconds);
  for (int r = 0; r < reps; ++r) job.samples.push_back(job.run_once(model, cache, logits));
  return median(job.samples);
}

// Prefill variant (logits of the last row only), used by run_bench through the same job type.
double time_prefill_chunk(Transformer& model, KvCache& cache, int m_rows, int reps, double min_rep_seconds) {
  check_reps(reps);
  check_room(cache, 0, m_rows, "prefill");
  ForwardJob job = make_job(model, 0, m_rows, /*all_logits=*/false);
  Logits logits;
  job.calibrate(model, cache, logits, min_rep_seconds);
  for (int r = 0; r < reps; ++r) job.samples.push_back(job.run_once(model, cache, logits));
  return median(job.samples);
}

CostCurve measure_cost_curve(Transformer& model, KvCache& cache, int m_max, int reps, double min_rep_seconds) {
  check_reps(reps);
  if (m_max < 1) throw Error("bench: m_max " + std::to_string(m_max) + " must be >= 1");
  const int context = cache.size();
  check_room(cache, context, m_max, "cost curve");
  std::vector<ForwardJob> jobs;  // (m_max) index M-1
  Logits logits;
  for (int m = 1; m <= m_max; ++m) {
    jobs.push_back(make_job(model, context, m, /*all_logits=*/true));
    jobs.back().calibrate(model, cache, logits, min_rep_seconds);
  }
  // Interleave the row counts inside each repeat so load changes hit every M alike.
  CostCurve curve;
  for (int r = 0; r < reps; ++r) {
    curve.handoff_ns.push_back(measure_handoff_latency(model.pool()).max_ns());
    for (ForwardJob& job : jobs) job.samples.push_back(job.run_once(model, cache, logits));
  }
  curve.context = context;
  for (const ForwardJob& job : jobs) {
    curve.seconds.push_back(median(job.samples));
    curve.min_seconds.push_back(*std::min_element(job.samples.begin(), job.samples.end()));
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    curve.cost.push_back(curve.seconds[i] / curve.seconds[0]);
    curve.min_cost.push_back(curve.min_seconds[i] / curve.min_seconds[0]);
    std::vector<double> ratios;  // (reps) this row count over the 1-row forward of the same repeat
    for (int r = 0; r < reps; ++r) ratios.push_back(jobs[i].samples[r] / jobs[0].samples[r]);
    curve.paired_cost.push_back(median(ratios));
  }
  curve.cost[0] = curve.min_cost[0] = curve.paired_cost[0] = 1.0;
  return curve;
}

namespace {

// Medians over `pairs` pairs of two figures taken one right after the other (each call of
// measure() returns one pair {a_i, b_i}), and of the per-pair ratios a_i / b_i (0 where b_i is 0).
struct PairMedians {
  double a = 0, b = 0, ratio = 0;
  double b_min = 0, b_max = 0;  // the range of the b values
};
template <typename MeasurePair>
PairMedians pair_medians(int pairs, MeasurePair measure) {
  std::vector<double> a, b, ratios;  // (pairs)
  for (int i = 0; i < pairs; ++i) {
    const auto [a_i, b_i] = measure();
    a.push_back(a_i);
    b.push_back(b_i);
    ratios.push_back(b_i > 0 ? a_i / b_i : 0.0);
  }
  return {median(a), median(b), median(ratios), *std::min_element(b.begin(), b.end()), *std::max_element(b.begin(), b.end())};
}

}  // namespace

PairedBandwidth measure_paired_bandwidth(Transformer& model, KvCache& cache, ReadBandwidthProbe& probe, int pairs,
                                         double min_rep_seconds) {
  if (pairs < 1) throw Error("bench: paired bandwidth needs >= 1 pair (got " + std::to_string(pairs) + ")");
  const int context = cache.size();
  check_room(cache, context, 1, "paired bandwidth");
  ForwardJob job = make_job(model, context, 1, /*all_logits=*/true);
  Logits logits;
  job.calibrate(model, cache, logits, min_rep_seconds);
  PairedBandwidth p;
  const PairMedians m = pair_medians(pairs, [&] {
    p.handoff_ns_each.push_back(measure_handoff_latency(model.pool()).max_ns());
    const double pass_gbs = probe.pass();
    const double gbs = static_cast<double>(model.weight_bytes()) / job.run_once(model, cache, logits) / 1e9;
    p.decode_gbs_each.push_back(gbs);
    p.probe_gbs_each.push_back(pass_gbs);
    return std::pair{gbs, pass_gbs};
  });
  p.pairs = pairs;
  p.ratio = m.ratio;
  p.decode_gbs = m.a;
  p.probe_gbs = m.b;
  p.probe_min_gbs = m.b_min;
  p.probe_max_gbs = m.b_max;
  return p;
}

PairedPrefill measure_paired_prefill(Transformer& model, KvCache& cache, KvCache& prefill_cache, int chunk, int pairs,
                                     double min_rep_seconds) {
  if (pairs < 1) throw Error("bench: paired prefill needs >= 1 pair (got " + std::to_string(pairs) + ")");
  check_room(prefill_cache, 0, chunk, "paired prefill");
  const int context = cache.size();
  check_room(cache, context, 1, "paired prefill's decode");
  ForwardJob prefill = make_job(model, 0, chunk, /*all_logits=*/false);
  ForwardJob decode = make_job(model, context, 1, /*all_logits=*/true);
  Logits logits;
  prefill_cache.truncate(0);
  prefill.calibrate(model, prefill_cache, logits, min_rep_seconds);
  decode.calibrate(model, cache, logits, min_rep_seconds);
  const PairMedians m = pair_medians(pairs, [&] {
    const double prefill_tps = chunk / prefill.run_once(model, prefill_cache, logits);
    return std::pair{prefill_tps, 1.0 / decode.run_once(model, cache, logits)};
  });
  PairedPrefill p;
  p.pairs = pairs;
  p.ratio = m.ratio;
  p.prefill_tps = m.a;
  p.decode_tps = m.b;
  return p;
}

ForwardProfile profile_forward(Transformer& model, KvCache& cache, int m_rows, int reps, double min_rep_seconds,
                               bool all_logits) {
  check_reps(reps);
  const int context = cache.size();
  check_room(cache, context, m_rows, "profile");
  ForwardJob job = make_job(model, context, m_rows, all_logits);
  Logits logits;
  job.calibrate(model, cache, logits, min_rep_seconds);
  ForwardProfile profile;
  model.set_profile(&profile);
  try {
    for (int r = 0; r < reps; ++r) job.run_once(model, cache, logits);
  } catch (...) {
    model.set_profile(nullptr);
    throw;
  }
  model.set_profile(nullptr);
  return profile;
}

double expected_tokens(double alpha, int k) {
  if (!(alpha >= 0.0 && alpha <= 1.0)) throw Error("acceptance rate " + std::to_string(alpha) + " outside [0, 1]");
  if (k < 0) throw Error("draft length " + std::to_string(k) + " must be >= 0");
  if (alpha == 1.0) return k + 1.0;
  return (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
}

Simulation simulate_speedup(double alpha, double c_draft, const std::string& c_draft_source,
                            const CostCurve& short_curve, const CostCurve& long_curve, int k_max) {
  if (c_draft < 0) throw Error("c_draft " + std::to_string(c_draft) + " must be >= 0");
  if (k_max < 1 || static_cast<int>(short_curve.cost.size()) < k_max + 1)
    throw Error("simulation up to K = " + std::to_string(k_max) + " needs c(M) up to M = " + std::to_string(k_max + 1) +
                " (measured up to " + std::to_string(short_curve.cost.size()) + ")");
  Simulation sim;
  sim.alpha = alpha;
  sim.c_draft = c_draft;
  sim.c_draft_source = c_draft_source;
  const bool have_long = static_cast<int>(long_curve.cost.size()) >= k_max + 1;
  double best_short = 0, best_long = 0;
  for (int k = 1; k <= k_max; ++k) {
    SimulatedPoint p;
    p.k = k;
    p.expected_tokens = expected_tokens(alpha, k);
    p.speedup_short = p.expected_tokens / (k * c_draft + short_curve.cost[static_cast<size_t>(k)]);
    if (have_long) p.speedup_long = p.expected_tokens / (k * c_draft + long_curve.cost[static_cast<size_t>(k)]);
    if (p.speedup_short > best_short) best_short = p.speedup_short, sim.best_k_short = k;
    if (p.speedup_long > best_long) best_long = p.speedup_long, sim.best_k_long = k;
    sim.points.push_back(p);
  }
  return sim;
}

double forced_acceptance_tps(Transformer& model, KvCache& cache, double alpha, int k,
                             double draft_seconds_per_token, int n_tokens, uint64_t seed) {
  if (!(alpha >= 0.0 && alpha <= 1.0)) throw Error("acceptance rate " + std::to_string(alpha) + " outside [0, 1]");
  if (k < 0 || n_tokens < 1) throw Error("forced loop: K " + std::to_string(k) + " and tokens " +
                                         std::to_string(n_tokens) + " must be >= 0 and >= 1");
  const int start = cache.size();
  check_room(cache, start, n_tokens + k + 1, "forced-acceptance loop");
  Rng rng(seed);
  Logits logits;
  KvCache* caches[] = {&cache};
  int n_emitted = 0;
  double seconds = 0;
  while (n_emitted < n_tokens) {
    const int context = cache.size();
    const Batch batch = chain_batch(context, k + 1, model.config().n_vocab, true, rng.next_u64());
    int n_accepted = 0;
    while (n_accepted < k && rng.uniform() < alpha) ++n_accepted;
    const double t0 = now_seconds();
    model.forward(batch, caches, logits);
    cache.truncate(context + n_accepted + 1);
    seconds += now_seconds() - t0 + k * draft_seconds_per_token;
    n_emitted += n_accepted + 1;
  }
  cache.truncate(start);
  return seconds > 0 ? n_emitted / seconds : 0.0;
}

size_t peak_rss_bytes() { return status_kib("VmHWM") * 1024; }
size_t current_rss_bytes() { return status_kib("VmRSS") * 1024; }

double MemoryReport::ratio() const {
  const double expected = static_cast<double>(mapped_file_bytes + kv_cache_bytes + draft_bytes);
  return expected > 0 ? static_cast<double>(peak_rss_bytes) / expected : 0.0;
}

}  // namespace specdec
