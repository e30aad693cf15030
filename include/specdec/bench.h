// specdec/bench.h — the `specdec bench` measurements as a library, so tests can run them:
// decode speed against the machine's measured read bandwidth, the verify cost curve
// c(M) = t(forward of M rows) / t(forward of 1 row) at a short and a long context, prefill
// speed, peak memory, end-to-end plain vs speculative decoding in the same run, and a clearly
// labelled SIMULATION of the speculative speedup from the measured costs.
//
// Every timing is a median over `reps` repeats; repeats of different row counts are interleaved
// (M = 1..m_max inside each repeat) so that a change in machine load hits all of them alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "specdec/compute_peak.h"
#include "specdec/engine.h"
#include "specdec/model.h"
#include "specdec/sampling.h"

namespace specdec {

class Transformer;
class KvCache;
class ReadBandwidthProbe;

struct BenchOptions {
  // The target, its threads, and (for the end-to-end part) the drafter. engine.model_path is
  // required; engine.n_threads 0 = physical cores.
  EngineOptions engine;
  bool end_to_end = false;      // run plain vs speculative through Engine::generate

  int reps = 5;                 // repeats per timing (median); >= 1
  double min_rep_seconds = 0.05;  // a repeat loops its forward until this much time passed
  int short_ctx = 16;           // cache positions before the timed rows ("short context")
  int long_ctx = 4096;          // the long context (capped at the model's context - m_max)
  int m_max = 17;               // c(M) for M = 1..m_max; >= 2
  int prefill_chunk = 256;      // tokens per prefill forward (capped by the context)

  size_t bandwidth_bytes = size_t{1} << 30;  // read-bandwidth probe buffer (0: skip the probe)
  int bandwidth_passes = 5;

  // End-to-end: each prompt is generated plain and speculative, `reps` times.
  std::vector<std::string> prompts;  // empty: built-in story prompts
  int max_tokens = 64;
  SamplingParams sampling = greedy_sampling();

  // SIMULATION: predicted speedup for K = 1..simulate_k_max at each alpha.
  std::vector<double> simulate_alpha;  // each in [0, 1]
  double simulate_c_draft = -1.0;      // < 0: measured (draft forward ratio) or 0 (model-free)
  int simulate_k_max = 8;              // capped at m_max - 1
  int simulate_loop_tokens = 0;        // > 0: also run the forced-acceptance decode loop
  // SIMULATION for token trees (issue 9): chain vs tree at each node budget, per profile
  // (see simulate_tree_vs_chain). Budgets are capped at m_max - 1.
  std::vector<std::vector<double>> simulate_tree_profiles;
  std::vector<int> simulate_tree_nodes = {8, 16};
  // End to end with a tree drafter (--spec tree / tree_nodes > 0): also run the same draft
  // model as a chain of the same node budget (draft_max = tree nodes), in the same run.
  bool compare_chain = false;
  // Where a forward's time goes, per phase (ForwardProfile), at the short context for
  // M = 1, 5 and 9 rows (those <= m_max), measured after the cost curve in separate forwards.
  bool profile = false;

  static SamplingParams greedy_sampling() {
    SamplingParams p;
    p.temperature = 0.0f;
    return p;
  }
};

// Timings of forwards of M rows (M = 1..m_max, index M-1) at one context length.
struct CostCurve {
  int context = 0;                  // cache positions before the timed rows
  std::vector<double> seconds;      // (m_max) median seconds of one forward of M rows
  std::vector<double> cost;         // (m_max) seconds[M-1] / seconds[0]; cost[0] == 1
  // The fastest repeat instead of the median: robust on a shared machine, where interference
  // only ever adds time. min_cost[0] == 1.
  std::vector<double> min_seconds;  // (m_max)
  std::vector<double> min_cost;     // (m_max) min_seconds[M-1] / min_seconds[0]
  // The median over repeats of t_r(M) / t_r(1), where repeat r times every row count back to
  // back (within a second): each ratio compares forwards of one memory regime, where cost
  // divides medians that may come from two (the Zen 4 VM of BENCHMARKS 49 moves between ~33
  // and ~60 GB/s from one minute to the next). paired_cost[0] == 1.
  std::vector<double> paired_cost;  // (m_max)
  // The threads' hand-off latency (handoff_latency.h, the slowest worker) before each repeat:
  // where it moved, the repeats ran in two placements of the threads (docs/BENCHMARKS.md 55).
  std::vector<double> handoff_ns;   // (reps) 0 on one thread
  bool empty() const { return seconds.empty(); }
};

struct MemoryReport {
  size_t peak_rss_bytes = 0;        // VmHWM of this process after the forward measurements
  size_t rss_bytes = 0;             // VmRSS at the same moment
  size_t mapped_file_bytes = 0;     // size of the target GGUF (mapped whole)
  size_t kv_cache_bytes = 0;        // the benchmark's KV cache (target)
  std::string kv_type = "F32";      // its element type (--kv-type)
  size_t draft_bytes = 0;           // draft GGUF + its cache when a draft model was loaded
  // peak / (mapped + kv + draft); the target of issue 6 is <= 1.10.
  double ratio() const;
};

struct EndToEndReport {
  std::string drafter;              // drafter name, "" when not run
  int n_prompts = 0;
  int reps = 0;
  int64_t plain_tokens = 0, spec_tokens = 0;
  double plain_seconds = 0, spec_seconds = 0;    // decode seconds, summed
  std::vector<double> speedup_per_rep;           // (reps) same-rep tokens/s ratio
  double speedup_median = 0;                     // median of speedup_per_rep
  SpecStats spec_stats;                          // counters summed over all speculative requests
  double c_draft = 0, verify_cost = 0;           // means over requests that measured them
  int n_outputs_differ = 0;                      // greedy: plain and speculative texts differ (must be 0)
  bool greedy = true;
  double plain_tps() const { return plain_seconds > 0 ? double(plain_tokens) / plain_seconds : 0.0; }
  double spec_tps() const { return spec_seconds > 0 ? double(spec_tokens) / spec_seconds : 0.0; }
};

// SIMULATION at one acceptance rate: E[tokens](K) = (1 - a^(K+1)) / (1 - a),
// speedup(K) = E[tokens](K) / (K * c_draft + c(K+1)).
struct SimulatedPoint {
  int k = 0;
  double expected_tokens = 0;
  double speedup_short = 0;         // with c(K+1) at the short context
  double speedup_long = 0;          // at the long context (0 when not measured)
  double loop_speedup = 0;          // forced-acceptance decode loop (0 when not run)
};

struct Simulation {
  double alpha = 0;
  double c_draft = 0;
  std::string c_draft_source;       // "given" | "draft model forward" | "model-free (0)"
  std::vector<SimulatedPoint> points;  // K = 1..k_max
  int best_k_short = 0, best_k_long = 0;
};

// SIMULATION for token trees under a positional acceptance model (Sequoia-style): at every
// node, the r-th most probable child (r = 0..W-1) is the one accepted with probability
// profile[r] (mutually exclusive, sum <= 1), whatever the path above it.
struct SimTree {
  std::vector<int> parent;     // (n_nodes) -1: child of the root
  std::vector<int> rank;       // (n_nodes) r: the node is its parent's r-th child
  std::vector<double> value;   // (n_nodes) probability that the node is accepted (product along the path)
  int depth = 0;               // levels (0 for an empty tree)
  int root_children = 0;
  // E[tokens per target pass] = 1 + sum of value (accepted nodes + the bonus/correction).
  double expected_tokens() const;
};
// The tree of n_nodes maximising E[tokens] under `profile` (best-first: each step adds the
// candidate child of largest value; ties: shallower, then earlier); optimal when the profile
// does not increase. A chain of n_nodes is best_first_tree({alpha}, n_nodes). Requires profile
// entries in [0, 1] with sum <= 1 (Error naming the value), n_nodes >= 0. Cost: O(n log n).
SimTree best_first_tree(const std::vector<double>& profile, int n_nodes);

struct TreeSimPoint {
  int nodes = 0;                       // the node budget N (= the chain's K)
  double chain_tokens = 0, tree_tokens = 0;   // E[tokens per target pass]
  int tree_depth = 0, tree_root_children = 0;
  double verify_cost = 0;              // c(N + 1), short context
  double chain_speedup = 0, tree_speedup = 0;  // E / (draft forwards * c_draft + c(N + 1))
  double chain_tps = 0, tree_tps = 0;  // decode tok/s * speedup
};
struct TreeSimulation {
  std::vector<double> profile;
  double c_draft = 0;
  std::string c_draft_source;
  std::vector<TreeSimPoint> points;
};
// The chain of N nodes (acceptance profile[0] per position, N draft forwards) against the
// best-first tree of N nodes (one draft forward per level), both verified in one target
// forward of N + 1 rows costing c(N + 1) from `curve`. Requires curve.cost.size() > every N.
TreeSimulation simulate_tree_vs_chain(const std::vector<double>& profile, const std::vector<int>& nodes, double c_draft,
                                      const std::string& c_draft_source, const CostCurve& curve, double decode_tps);

struct BenchReport {
  // Run context
  std::string model_path, model_name, isa;
  std::string decode_prefetch;  // decode_prefetch_name(decode_prefetch()) (cpu.h)
  std::string verify_prefetch;  // verify_prefetch_name(verify_prefetch()) (cpu.h)
  std::string date;                 // UTC, ISO 8601
  int n_threads = 0, reps = 0;
  int n_layers = 0, n_embd = 0, n_vocab = 0, n_ctx = 0;
  std::string weight_types;         // e.g. "Q8_0 x112, Q6_K x1, F32 x33"
  double load_average_1min = -1;    // /proc/loadavg at the start (-1: unknown)
  // The target's thread pool over the run until the bandwidth probe (thread_pool.h): stall
  // verdicts and the parallel calls their back-offs sent to the calling thread alone. Inline
  // calls mean some measurements ran on one thread: other tenants, or more threads than cores.
  int64_t pool_stalls = 0, pool_inline_calls = 0;

  // Decode and bandwidth
  size_t weight_bytes = 0;          // Transformer::weight_bytes(): streamed per forward
  double decode_seconds = 0;        // median 1-row forward at the short context
  double decode_tps = 0;            // 1 / decode_seconds
  double decode_tps_long = 0;       // at the long context
  double decode_min_seconds = 0;    // fastest repeat of the 1-row forward (short context)
  double achieved_gbs = 0;          // weight_bytes / decode_seconds / 1e9
  double bandwidth_gbs = 0;         // measured probe (0: skipped)
  double bandwidth_ratio = 0;       // achieved / measured
  // The probe's passes interleaved with 1-row forward repeats (pass, repeat, pass, ...), each
  // repeat's GB/s over the pass just before it: on a machine whose bandwidth moves between runs
  // (other tenants) the ratio of figures taken seconds apart. Medians over the pairs.
  int paired_count = 0;             // 0: skipped (no probe)
  double paired_ratio = 0, paired_decode_gbs = 0, paired_probe_gbs = 0;
  // The slowest and fastest of those probe passes: far apart (kProbeSpreadNote) when the
  // memory's speed moved during the run, so that only figures taken within a pair compare.
  double paired_probe_min_gbs = 0, paired_probe_max_gbs = 0;
  // Each pair's figures in order: its decode and probe GB/s, and the threads' hand-off latency
  // (handoff_latency.h: one way, the slowest worker, ns; 0 on one thread) before its probe pass.
  std::vector<double> paired_decode_gbs_each, paired_probe_gbs_each, paired_handoff_ns_each;  // (paired_count)
  // The same hand-off latency with the compute probes before and after the model measurements
  // (0: one thread). Where it moves, the system moved the threads between cache domains, and with
  // them the memory's speed (docs/BENCHMARKS.md 55).
  double handoff_ns_start = 0, handoff_ns_end = 0;

  // Compute roofline: the multiply-add peak of the kernels' product instructions on the same
  // threads (measure_compute_peak; zeros on the scalar path), and the weights' multiply-adds per
  // forward row by family (8-bit products for quantized weights, f32 FMA for F16/BF16/F32).
  // row_floor_seconds = those at peak: no forward row, verify or prefill, costs less on these
  // instructions (0: not measured).
  ComputePeak compute_peak;
  double int8_macs_per_row = 0, f32_macs_per_row = 0;
  double row_floor_seconds = 0;
  // Attention's f32 multiply-adds per visible key of one row: n_layers * n_heads * head_dim * 2
  // (the score q.k and the weighted sum p v). A row at context C adds C times this to its
  // products, which at 4k keys of the 1B shape (268 M) cost more at the FMA peak than the
  // weights' 8-bit products: the long context's roofline lines (text) and
  // compute_roofline.long_rows_floor_seconds (JSON) add them. 0: not measured.
  double attention_macs_per_key = 0;

  // Cost curves and prefill
  CostCurve short_curve, long_curve;
  int prefill_chunk = 0;
  bool prefill_splits_rows = false;  // the chunk's blocks split their rows between the threads (Transformer::splits_rows)
  double prefill_tps = 0;           // median over reps of chunk tokens / chunk seconds from position 0
  double fill_tps = 0;              // tokens / seconds filling the long context (growing context)
  double prefill_over_decode = 0;   // prefill_tps / decode_tps (issue 6: >= 8 for the 1B shape)
  // A prefill chunk (its own cache), then a 1-row forward repeat at the short context, per pair;
  // each pair's prefill tokens/s over its decode tokens/s. prefill_over_decode divides figures
  // measured a minute apart, which on a machine whose memory speed moves between two levels
  // (BENCHMARKS 49) gave 6.3x and 10.3x for the same build: prefill is compute-bound and kept its
  // speed, the decode did not. Medians over the pairs; 0 pairs: not measured.
  int prefill_paired_count = 0;
  double prefill_paired_ratio = 0, prefill_paired_tps = 0, prefill_paired_decode_tps = 0;

  MemoryReport memory;

  // BenchOptions::profile: (M rows, phase times summed over `forwards` forwards)
  std::vector<std::pair<int, ForwardProfile>> profiles;
  // BenchOptions::profile: the prefill chunk's forward (prefill_chunk rows from position 0, the
  // last row's logits); forwards == 0: not measured
  ForwardProfile prefill_profile;

  // Draft model alone (when given)
  double draft_decode_seconds = 0;  // median 1-row draft forward at the short context
  double c_draft_forward = 0;       // draft_decode_seconds / decode_seconds

  EndToEndReport end_to_end;        // drafter empty when not run
  EndToEndReport end_to_end_chain;  // BenchOptions::compare_chain: the chain at the tree's budget
  std::vector<TreeSimulation> tree_simulations;
  std::vector<Simulation> simulations;
  int simulate_loop_tokens = 0;
};

// The median of `values` (the mean of the middle two for an even count); 0 for none.
double median_of(std::vector<double> values);

// Progress messages ("measuring c(M) at context 4096..."); may be empty.
using BenchLog = std::function<void(const std::string&)>;

// Runs every measurement the options ask for. Requires: engine.model_path a loadable GGUF,
// reps >= 1, m_max >= 2, alphas in [0, 1] (Error naming the value otherwise). Guarantees:
// c(1) == 1 exactly; the memory snapshot is taken before the bandwidth probe and before any
// second model mapping. Cost: about reps * (sum over M of t(M)) * 2 contexts + the long fill +
// the bandwidth probe + end-to-end generation; seconds for stories260K, minutes for 1B shapes.
BenchReport run_bench(const BenchOptions& options, const BenchLog& log = {});

// Median seconds of one forward of m_rows chain rows appended at cache position `context`
// (the cache is truncated back to `context` after each). Requires cache.size() >= context and
// context + m_rows <= cache.capacity(). Cost: reps * max(1, min_rep_seconds / t) forwards.
double time_forward(Transformer& model, KvCache& cache, int context, int m_rows, int reps,
                    double min_rep_seconds);

// Median seconds of a prefill forward of m_rows tokens from position 0 (logits of the last row
// only). Leaves the cache empty. Requires m_rows <= cache.capacity(). Cost: as time_forward.
double time_prefill_chunk(Transformer& model, KvCache& cache, int m_rows, int reps, double min_rep_seconds);

// The verify cost curve at the cache's current size: forwards of M = 1..m_max rows, repeats
// interleaved over M. Requires cache.size() + m_max <= cache.capacity().
CostCurve measure_cost_curve(Transformer& model, KvCache& cache, int m_max, int reps, double min_rep_seconds);

// A probe pass, then a 1-row forward repeat at the cache's current size, `pairs` times; each
// repeat's achieved GB/s (model.weight_bytes() per forward) over that pass's. Medians over the
// pairs, and the probe passes' range. Requires pairs >= 1 and room for one row in the cache
// (left as it was).
struct PairedBandwidth {
  int pairs = 0;
  double ratio = 0, decode_gbs = 0, probe_gbs = 0;
  double probe_min_gbs = 0, probe_max_gbs = 0;
  // Each pair's figures in order, with the threads' hand-off latency before its probe pass
  // (measure_handoff_latency(pool), the slowest worker; 0 on one thread).
  std::vector<double> decode_gbs_each, probe_gbs_each, handoff_ns_each;  // (pairs)
};
// The report notes a run whose paired probe passes' fastest read this many times the slowest:
// on the Zen 4 VMs of docs/BENCHMARKS.md 51-53 the memory moved between ~33 and ~60 GB/s
// within minutes, while within one such regime the passes varied by up to ~1.22x (53a).
constexpr double kProbeSpreadNote = 1.25;
// The report notes a run whose hand-off latencies (start, end and the pairs') spread this many
// times: on those VMs ~30 ns with both vCPUs on one CCD, ~130-500 ns on two (section 55).
constexpr double kHandoffSpreadNote = 2.5;
PairedBandwidth measure_paired_bandwidth(Transformer& model, KvCache& cache, ReadBandwidthProbe& probe, int pairs,
                                         double min_rep_seconds);

// A prefill forward of `chunk` rows from position 0 of prefill_cache (left empty), then a 1-row
// forward repeat at `cache`'s current size (left as it was), `pairs` times; each pair's prefill
// tokens/s over that pair's decode tokens/s. Medians over the pairs. Requires pairs >= 1, chunk
// <= prefill_cache.capacity() and room for one row in cache. Cost: pairs * (a prefill and a
// decode repeat, each max(1, min_rep_seconds / t) forwards).
struct PairedPrefill {
  int pairs = 0;
  double ratio = 0, prefill_tps = 0, decode_tps = 0;
};
PairedPrefill measure_paired_prefill(Transformer& model, KvCache& cache, KvCache& prefill_cache, int chunk, int pairs,
                                     double min_rep_seconds);

// Phase times of forwards of m_rows chain rows at the cache's current size (ForwardProfile),
// over reps * max(1, min_rep_seconds / t) forwards after one warm-up. Same requirements as
// measure_cost_curve. all_logits: every row's logits (a verify); false: the last row's (prefill).
ForwardProfile profile_forward(Transformer& model, KvCache& cache, int m_rows, int reps, double min_rep_seconds,
                               bool all_logits = true);

// E[tokens](K) for a per-position acceptance rate alpha in [0, 1]: (1 - a^(K+1)) / (1 - a).
double expected_tokens(double alpha, int k);
// The SIMULATION for one alpha from measured curves (long may be empty). Requires
// short_curve.cost.size() >= k_max + 1.
Simulation simulate_speedup(double alpha, double c_draft, const std::string& c_draft_source,
                            const CostCurve& short_curve, const CostCurve& long_curve, int k_max);

// Forced-acceptance decode loop (SIMULATION): from the cache's current size, steps of one real
// target forward over K+1 chain rows, acceptance of each draft position drawn with probability
// alpha (seeded Rng, stops at the first rejection), cache truncated to the accepted prefix plus
// one, 1 + n_accepted tokens emitted; drafting is not run but charged as K *
// draft_seconds_per_token per step. K = 0 is plain decoding. Returns emitted tokens per second
// of wall time (+ charged drafting) until n_tokens are emitted, and restores the cache size.
// Requires cache.size() + n_tokens + k + 1 <= cache.capacity(), alpha in [0, 1].
// Cost: about n_tokens / E[tokens](K) forwards of K+1 rows.
double forced_acceptance_tps(Transformer& model, KvCache& cache, double alpha, int k,
                             double draft_seconds_per_token, int n_tokens, uint64_t seed);

// Peak and current resident set size of this process from /proc/self/status (0 when unknown).
size_t peak_rss_bytes();
size_t current_rss_bytes();

// Human-readable report (the SIMULATION section is labelled as such). Both reports throw Error
// when a cost curve's four vectors differ in length (a report not made by run_bench).
std::string bench_report_text(const BenchReport& report);
// Every figure as a JSON document (pretty-printed).
std::string bench_report_json(const BenchReport& report);
// An SVG document: c(M) at both contexts, and simulated speedup vs K for each alpha.
std::string bench_report_svg(const BenchReport& report);

}  // namespace specdec
