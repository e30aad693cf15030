// engine/bench_run.cpp — run_bench: the order of the `specdec bench` measurements.
//
//   1. target alone: prefill chunk, short-context c(M) (decode speed = 1/t(1)), long fill,
//      long-context c(M), optional forced-acceptance loop;
//   2. draft model alone (when given): its 1-row forward, hence c_draft;
//   3. memory snapshot (peak RSS) while exactly those mappings and caches exist;
//   4. read-bandwidth probe on the target's thread pool (its passes paired with decode
//      repeats), prefill chunks paired with decode repeats, then both models are released;
//   5. end-to-end plain vs speculative through Engine::generate on the same prompts;
//   6. the SIMULATION from the measured curves (arithmetic only).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <tuple>

#include "specdec/bandwidth.h"
#include "specdec/bench.h"
#include "specdec/cpu.h"
#include "specdec/error.h"
#include "specdec/gguf.h"
#include "specdec/handoff_latency.h"
#include "specdec/model.h"
#include "specdec/thread_pool.h"
#include "specdec/timer.h"

namespace specdec {

namespace {

// Short story openings: the stories260K vocabulary covers them and they fit its 128 context.
const std::vector<std::string>& builtin_prompts() {
  static const std::vector<std::string> prompts = {
      "Once upon a time",
      "Lily and Tom went to the park. They saw a big",
      "The little dog was sad because",
      "One day, a girl named Sue found a box. She",
  };
  return prompts;
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double one_minute = -1;
  if (!(in >> one_minute)) return -1;
  return one_minute;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string weight_type_summary(const GgufFile& gguf) {
  std::map<std::string, int> counts;
  for (const GgufTensorInfo& t : gguf.tensors()) ++counts[dtype_name(t.type)];
  std::string out;
  for (const auto& [name, n] : counts) out += (out.empty() ? "" : ", ") + name + " x" + std::to_string(n);
  return out;
}

// Multiply-adds of one forward row's matmuls by product family: {8-bit (quantized weights),
// f32 (F16, BF16, F32 weights)}. Every 2-D tensor is a matmul weight except the token
// embedding, which is a row lookup unless it doubles as the output matrix (no output.weight).
std::pair<double, double> row_multiply_adds(const GgufFile& gguf) {
  const bool tied_output = gguf.find_tensor("output.weight") == nullptr;
  double int8 = 0, f32 = 0;
  for (const GgufTensorInfo& t : gguf.tensors()) {
    if (t.dims.size() != 2 || (t.name == "token_embd.weight" && !tied_output)) continue;
    const double macs = static_cast<double>(t.n_elements());
    (t.type == DType::F32 || t.type == DType::F16 || t.type == DType::BF16 ? f32 : int8) += macs;
  }
  return {int8, f32};
}

size_t file_size(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  return in ? static_cast<size_t>(in.tellg()) : 0;
}

void validate(const BenchOptions& o) {
  if (o.engine.model_path.empty()) throw Error("bench: no model given (-m MODEL.gguf)");
  if (o.reps < 1) throw Error("bench: --reps " + std::to_string(o.reps) + " must be >= 1");
  if (o.m_max < 2) throw Error("bench: m_max " + std::to_string(o.m_max) + " must be >= 2");
  if (o.short_ctx < 1) throw Error("bench: short context " + std::to_string(o.short_ctx) + " must be >= 1");
  if (o.prefill_chunk < 1) throw Error("bench: prefill chunk " + std::to_string(o.prefill_chunk) + " must be >= 1");
  if (o.max_tokens < 1) throw Error("bench: max tokens " + std::to_string(o.max_tokens) + " must be >= 1");
  if (o.simulate_k_max < 1) throw Error("bench: simulate K max " + std::to_string(o.simulate_k_max) + " must be >= 1");
  if (o.bandwidth_bytes != 0 && o.bandwidth_bytes < (size_t{1} << 20))
    throw Error("bench: bandwidth probe of " + std::to_string(o.bandwidth_bytes) + " bytes is below 1 MiB");
  for (double a : o.simulate_alpha)
    if (!(a >= 0.0 && a <= 1.0)) throw Error("bench: --simulate-alpha " + std::to_string(a) + " outside [0, 1]");
  for (const auto& profile : o.simulate_tree_profiles) best_first_tree(profile, 0);  // Error on a bad profile
  for (int n : o.simulate_tree_nodes)
    if (n < 1) throw Error("bench: --simulate-tree-nodes " + std::to_string(n) + " must be >= 1");
  if (o.compare_chain && !(o.engine.tree_nodes > 0 || (o.engine.method && *o.engine.method == SpecMethod::Tree)))
    throw Error("bench: --compare-chain needs a tree drafter (--spec tree or --tree-nodes N)");
}

// The engine options of the chain that --compare-chain runs against a tree: same drafter
// source, no tree, draft_max = the tree's node budget.
EngineOptions chain_of_tree(const EngineOptions& tree) {
  EngineOptions chain = tree;
  const int budget = tree.tree_nodes > 0 ? tree.tree_nodes : tree.spec.draft_max;
  if (chain.method && *chain.method == SpecMethod::Tree)
    chain.method = tree.draft_path.empty() ? SpecMethod::Lookup : SpecMethod::Draft;
  chain.tree_nodes = 0;
  chain.spec.draft_max = std::max(chain.spec.draft_min, budget);
  return chain;
}

// Fills the cache from its size up to `target_size` with random-token prefill chunks.
// Returns the seconds spent.
double fill_cache(Transformer& model, KvCache& cache, int target_size, int chunk) {
  Logits logits;
  KvCache* caches[] = {&cache};
  Batch batch;
  uint64_t state = 0x5EEDF111ull;
  const int n_vocab = model.config().n_vocab;
  const double t0 = now_seconds();
  while (cache.size() < target_size) {
    const int start = cache.size();
    const int n = std::min(chunk, target_size - start);
    batch.clear();
    for (int i = 0; i < n; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const Token token = static_cast<Token>(3 + (state >> 33) % static_cast<uint64_t>(std::max(1, n_vocab - 3)));
      batch.add(std::min(token, static_cast<Token>(n_vocab - 1)), start + i, i == 0 ? -1 : i - 1, 0, i == n - 1);
    }
    model.forward(batch, caches, logits);
  }
  return now_seconds() - t0;
}

void add_stats(SpecStats& sum, const SpecStats& s) {
  sum.n_target_passes += s.n_target_passes;
  sum.n_drafted += s.n_drafted;
  sum.n_accepted += s.n_accepted;
  sum.n_emitted += s.n_emitted;
  sum.n_prefill_tokens += s.n_prefill_tokens;
  auto add_vec = [](std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    if (a.size() < b.size()) a.resize(b.size(), 0);
    for (size_t i = 0; i < b.size(); ++i) a[i] += b[i];
  };
  add_vec(sum.drafted_by_pos, s.drafted_by_pos);
  add_vec(sum.accepted_by_pos, s.accepted_by_pos);
  sum.decode_seconds += s.decode_seconds;
  sum.prefill_seconds += s.prefill_seconds;
  sum.lossy = sum.lossy || s.lossy;
}

EndToEndReport run_end_to_end(const BenchOptions& o, const BenchLog& log) {
  Engine engine(o.engine);
  EndToEndReport e;
  const std::vector<std::string>& prompts = o.prompts.empty() ? builtin_prompts() : o.prompts;
  e.n_prompts = static_cast<int>(prompts.size());
  e.reps = o.reps;
  e.greedy = o.sampling.greedy();
  double c_draft_sum = 0, verify_sum = 0;
  int n_c_draft = 0, n_verify = 0;
  for (int rep = 0; rep < o.reps; ++rep) {
    if (log) log("end-to-end repeat " + std::to_string(rep + 1) + "/" + std::to_string(o.reps));
    int64_t plain_tokens = 0, spec_tokens = 0;
    double plain_seconds = 0, spec_seconds = 0;
    for (const std::string& prompt : prompts) {
      GenerateRequest request;
      request.prompt = prompt;
      request.max_tokens = o.max_tokens;
      request.sampling = o.sampling;
      request.speculative = false;
      const GenerateResult plain = engine.generate(request);
      request.speculative = true;
      const GenerateResult spec = engine.generate(request);
      e.drafter = spec.drafter_name;
      plain_tokens += static_cast<int64_t>(plain.tokens.size());
      plain_seconds += plain.decode_seconds;
      spec_tokens += static_cast<int64_t>(spec.tokens.size());
      spec_seconds += spec.decode_seconds;
      add_stats(e.spec_stats, spec.stats);
      if (spec.stats.c_draft > 0) c_draft_sum += spec.stats.c_draft, ++n_c_draft;
      if (spec.stats.verify_cost > 0) verify_sum += spec.stats.verify_cost, ++n_verify;
      if (e.greedy && plain.tokens != spec.tokens) ++e.n_outputs_differ;
    }
    e.plain_tokens += plain_tokens;
    e.plain_seconds += plain_seconds;
    e.spec_tokens += spec_tokens;
    e.spec_seconds += spec_seconds;
    const double plain_tps = plain_seconds > 0 ? plain_tokens / plain_seconds : 0;
    const double spec_tps = spec_seconds > 0 ? spec_tokens / spec_seconds : 0;
    e.speedup_per_rep.push_back(plain_tps > 0 ? spec_tps / plain_tps : 0);
  }
  e.speedup_median = median_of(e.speedup_per_rep);
  e.c_draft = n_c_draft ? c_draft_sum / n_c_draft : 0;
  e.verify_cost = n_verify ? verify_sum / n_verify : 0;
  return e;
}

}  // namespace

BenchReport run_bench(const BenchOptions& o, const BenchLog& log) {
  validate(o);
  BenchReport r;
  r.load_average_1min = load_average();
  r.date = utc_now();
  r.model_path = o.engine.model_path;
  r.isa = active_isa_label();
  r.decode_prefetch = decode_prefetch_name(decode_prefetch());
  r.verify_prefetch = verify_prefetch_name(verify_prefetch());
  r.reps = o.reps;
  r.simulate_loop_tokens = o.simulate_loop_tokens;

  ModelOptions model_options;
  model_options.n_threads = o.engine.n_threads;
  model_options.kv_type = o.engine.kv_type;
  model_options.repack_weights = o.engine.repack_weights;
  std::unique_ptr<Transformer> target = Transformer::load(o.engine.model_path, model_options);
  const ModelConfig& cfg = target->config();
  r.model_name = cfg.name;
  r.n_threads = target->pool().size();
  r.n_layers = cfg.n_layers;
  r.n_embd = cfg.n_embd;
  r.n_vocab = cfg.n_vocab;
  r.n_ctx = cfg.n_ctx_train;
  r.weight_types = weight_type_summary(target->gguf());
  r.weight_bytes = target->weight_bytes();

  // Cache sized for the long context plus the timed rows (and the forced loop, at short context).
  const int m_max = o.m_max;
  if (cfg.n_ctx_train < o.short_ctx + m_max + 1)
    throw Error("bench: the model's context of " + std::to_string(cfg.n_ctx_train) + " is too short for a " +
                std::to_string(o.short_ctx) + "-token prefix plus " + std::to_string(m_max) + " rows");
  const int long_ctx = std::min(o.long_ctx, cfg.n_ctx_train - m_max);
  const bool measure_long = long_ctx > o.short_ctx;
  int loop_tokens = std::max(0, o.simulate_loop_tokens);
  int capacity = std::max(measure_long ? long_ctx + m_max : o.short_ctx + m_max, 1);
  if (loop_tokens > 0) {
    loop_tokens = std::max(0, std::min(loop_tokens, cfg.n_ctx_train - o.short_ctx - m_max - 1));
    capacity = std::max(capacity, o.short_ctx + loop_tokens + m_max + 1);
    r.simulate_loop_tokens = loop_tokens;
  }
  // The prefill chunk is timed from position 0: the cache holds the requested chunk even when
  // the curves need fewer positions (with --ctx-long 0 a 64-token chunk was cut to 16 + M_max).
  capacity = std::max(capacity, o.prefill_chunk);
  capacity = std::min(capacity, cfg.n_ctx_train);
  KvCache cache = target->new_cache(capacity);  // (n_layers, capacity, kv_dim) x2
  r.memory.kv_cache_bytes = cache.bytes();
  r.memory.kv_type = dtype_name(cache.type());
  r.memory.mapped_file_bytes = file_size(o.engine.model_path);

  // The compute probe runs before and after the model measurements and keeps the faster of the
  // two for each family: one 0.1 s window can be slowed by another tenant (a run reported
  // prefill at 117% of a probe that had read 235 instead of ~430 GMAC/s).
  if (log) log("compute peak probe (first of two)");
  const ComputePeak early_peak = measure_compute_peak(target->pool());
  r.handoff_ns_start = measure_handoff_latency(target->pool()).max_ns();

  // 1. Prefill at position 0, then decode and c(M) at the short context.
  r.prefill_chunk = std::min(o.prefill_chunk, capacity);
  r.prefill_splits_rows = target->splits_rows(r.prefill_chunk);
  if (log) log("prefill: " + std::to_string(r.prefill_chunk) + "-token chunks");
  const double prefill_seconds = time_prefill_chunk(*target, cache, r.prefill_chunk, o.reps, o.min_rep_seconds);
  r.prefill_tps = r.prefill_chunk / prefill_seconds;
  if (o.profile) {
    if (log) log("profile of " + std::to_string(r.prefill_chunk) + "-row prefill forwards");
    r.prefill_profile = profile_forward(*target, cache, r.prefill_chunk, o.reps, o.min_rep_seconds, /*all_logits=*/false);
  }
  fill_cache(*target, cache, o.short_ctx, o.prefill_chunk);
  if (log) log("c(M), M = 1.." + std::to_string(m_max) + ", at context " + std::to_string(o.short_ctx));
  r.short_curve = measure_cost_curve(*target, cache, m_max, o.reps, o.min_rep_seconds);
  r.decode_seconds = r.short_curve.seconds[0];
  r.decode_tps = 1.0 / r.decode_seconds;
  r.achieved_gbs = static_cast<double>(r.weight_bytes) / r.decode_seconds / 1e9;
  r.prefill_over_decode = r.prefill_tps / r.decode_tps;
  r.decode_min_seconds = r.short_curve.min_seconds[0];
  if (o.profile) {
    for (int m : {1, 5, 9}) {
      if (m > m_max) break;
      if (log) log("profile of " + std::to_string(m) + "-row forwards");
      r.profiles.emplace_back(m, profile_forward(*target, cache, m, o.reps, o.min_rep_seconds));
    }
  }

  // Forced-acceptance loop at the short context (the cache keeps its first short_ctx rows).
  std::vector<double> loop_speedups;  // (alphas * k_max)
  const int k_max = std::min(o.simulate_k_max, m_max - 1);
  const double given_c_draft = o.simulate_c_draft;

  if (measure_long) {
    if (log) log("filling the cache to " + std::to_string(long_ctx) + " tokens");
    const int before = cache.size();
    const double seconds = fill_cache(*target, cache, long_ctx, o.prefill_chunk);
    r.fill_tps = seconds > 0 ? (long_ctx - before) / seconds : 0;
    if (log) log("c(M), M = 1.." + std::to_string(m_max) + ", at context " + std::to_string(long_ctx));
    r.long_curve = measure_cost_curve(*target, cache, m_max, o.reps, o.min_rep_seconds);
    r.decode_tps_long = 1.0 / r.long_curve.seconds[0];
    cache.truncate(o.short_ctx);
  }

  // 2. The draft model alone.
  std::unique_ptr<Transformer> draft;
  const bool draft_model_used =
      !o.engine.draft_path.empty() &&
      (!o.engine.method || *o.engine.method == SpecMethod::Draft || *o.engine.method == SpecMethod::Hybrid ||
       *o.engine.method == SpecMethod::Tree);
  if (draft_model_used) {
    if (log) log("draft model: 1-row forward");
    draft = Transformer::load(o.engine.draft_path, model_options);
    const int draft_ctx = std::min(draft->config().n_ctx_train, o.short_ctx + 1);
    KvCache draft_cache = draft->new_cache(draft_ctx);
    fill_cache(*draft, draft_cache, draft_ctx - 1, o.prefill_chunk);
    r.draft_decode_seconds = time_forward(*draft, draft_cache, draft_ctx - 1, 1, o.reps, o.min_rep_seconds);
    r.c_draft_forward = r.draft_decode_seconds / r.decode_seconds;
    r.memory.draft_bytes = file_size(o.engine.draft_path) + draft_cache.bytes();
  }

  // Forced-acceptance loop (needs c_draft, so after the draft measurement).
  double sim_c_draft = 0;
  std::string sim_source = "model-free (0)";
  if (given_c_draft >= 0) {
    sim_c_draft = given_c_draft;
    sim_source = "given";
  } else if (draft_model_used) {
    sim_c_draft = r.c_draft_forward;
    sim_source = "draft model forward";
  }
  if (loop_tokens > 0 && !o.simulate_alpha.empty()) {
    if (log) log("SIMULATION: forced-acceptance decode loop, " + std::to_string(loop_tokens) + " tokens per run");
    const double draft_seconds = sim_c_draft * r.decode_seconds;
    const size_t n_alpha = o.simulate_alpha.size();
    std::vector<std::vector<double>> ratios(n_alpha * static_cast<size_t>(k_max));  // (alphas, k_max) x reps
    // Each repeat runs a plain loop, then the K-loop of every (K, alpha): a ratio compares runs
    // of the same repeat, so slow load changes mostly cancel.
    // Small models: a run repeats its loop until it lasts min_rep_seconds (mean seconds per token).
    const double plain_once = loop_tokens / forced_acceptance_tps(*target, cache, 0.0, 0, 0.0, loop_tokens, 1);
    const int inner = static_cast<int>(std::clamp(std::ceil(o.min_rep_seconds / plain_once), 1.0, 10000.0));
    auto loop_tps = [&](double alpha, int k, uint64_t seed) {
      double seconds_per_token = 0;
      for (int i = 0; i < inner; ++i)
        seconds_per_token += 1.0 / forced_acceptance_tps(*target, cache, alpha, k, draft_seconds, loop_tokens,
                                                         seed + 7919u * static_cast<uint64_t>(i));
      return inner / seconds_per_token;
    };
    for (int rep = 0; rep < o.reps; ++rep) {
      const double plain_tps = loop_tps(0.0, 0, 1);
      for (int k = 1; k <= k_max; ++k)
        for (size_t a = 0; a < n_alpha; ++a) {
          const uint64_t seed = (static_cast<uint64_t>(rep) << 32) + 1000 * a + static_cast<uint64_t>(k);
          const double tps = loop_tps(o.simulate_alpha[a], k, seed);
          ratios[a * static_cast<size_t>(k_max) + static_cast<size_t>(k - 1)].push_back(tps / plain_tps);
        }
    }
    for (const auto& samples : ratios) loop_speedups.push_back(median_of(samples));
  }

  // 3. Memory while the mappings and caches above exist.
  // RSS first: the high-water mark only grows, so reading it second keeps peak >= rss even
  // when an allocation lands between the two reads of /proc/self/status.
  r.memory.rss_bytes = current_rss_bytes();
  r.memory.peak_rss_bytes = peak_rss_bytes();

  const ThreadPool::StallStats stalls = target->pool().stall_stats();
  r.pool_stalls = stalls.n_stalls;
  r.pool_inline_calls = stalls.n_inline_calls;

  // 4. Compute peak and bandwidth on the same threads, then release the models.
  if (log) log("compute peak probe (second of two)");
  r.compute_peak = measure_compute_peak(target->pool());
  r.handoff_ns_end = measure_handoff_latency(target->pool()).max_ns();
  if (early_peak.int8_gmacs > r.compute_peak.int8_gmacs) r.compute_peak.int8_gmacs = early_peak.int8_gmacs;
  if (early_peak.f32_gmacs > r.compute_peak.f32_gmacs) r.compute_peak.f32_gmacs = early_peak.f32_gmacs;
  std::tie(r.int8_macs_per_row, r.f32_macs_per_row) = row_multiply_adds(target->gguf());
  r.attention_macs_per_key = 2.0 * cfg.n_layers * cfg.n_heads * cfg.head_dim;
  if (r.compute_peak.int8_gmacs > 0 && r.compute_peak.f32_gmacs > 0)
    r.row_floor_seconds = (r.int8_macs_per_row / r.compute_peak.int8_gmacs + r.f32_macs_per_row / r.compute_peak.f32_gmacs) / 1e9;
  if (o.bandwidth_bytes > 0) {
    if (log) log("read bandwidth probe: " + std::to_string(o.bandwidth_bytes >> 20) + " MiB x " +
                 std::to_string(o.bandwidth_passes) + " passes");
    ReadBandwidthProbe probe(target->pool(), o.bandwidth_bytes);
    for (int pass = 0; pass < o.bandwidth_passes; ++pass) r.bandwidth_gbs = std::max(r.bandwidth_gbs, probe.pass());
    r.bandwidth_ratio = r.achieved_gbs / r.bandwidth_gbs;
    if (log) log("read bandwidth probe passes paired with decode repeats");
    const PairedBandwidth paired = measure_paired_bandwidth(*target, cache, probe, std::max(o.reps, 5), o.min_rep_seconds);
    r.paired_count = paired.pairs;
    r.paired_ratio = paired.ratio;
    r.paired_decode_gbs = paired.decode_gbs;
    r.paired_probe_gbs = paired.probe_gbs;
    r.paired_probe_min_gbs = paired.probe_min_gbs;
    r.paired_probe_max_gbs = paired.probe_max_gbs;
    r.paired_decode_gbs_each = paired.decode_gbs_each;
    r.paired_probe_gbs_each = paired.probe_gbs_each;
    r.paired_handoff_ns_each = paired.handoff_ns_each;
  }
  {
    if (log) log("prefill chunks paired with decode repeats");
    KvCache prefill_cache = target->new_cache(r.prefill_chunk);  // (n_layers, chunk, kv_dim) x2, after the memory snapshot
    const PairedPrefill paired =
        measure_paired_prefill(*target, cache, prefill_cache, r.prefill_chunk, std::max(o.reps, 5), o.min_rep_seconds);
    r.prefill_paired_count = paired.pairs;
    r.prefill_paired_ratio = paired.ratio;
    r.prefill_paired_tps = paired.prefill_tps;
    r.prefill_paired_decode_tps = paired.decode_tps;
  }
  draft.reset();
  cache = KvCache(cfg, 1);
  target.reset();

  // 5. End to end.
  if (o.end_to_end) r.end_to_end = run_end_to_end(o, log);
  if (o.end_to_end && o.compare_chain) {
    if (log) log("end to end: the chain at the tree's node budget");
    BenchOptions chain = o;
    chain.engine = chain_of_tree(o.engine);
    r.end_to_end_chain = run_end_to_end(chain, log);
  }

  // 6. SIMULATION.
  for (size_t a = 0; a < o.simulate_alpha.size(); ++a) {
    Simulation sim = simulate_speedup(o.simulate_alpha[a], sim_c_draft, sim_source, r.short_curve, r.long_curve, k_max);
    if (!loop_speedups.empty())
      for (int k = 1; k <= k_max; ++k)
        sim.points[static_cast<size_t>(k - 1)].loop_speedup = loop_speedups[a * static_cast<size_t>(k_max) + (k - 1)];
    r.simulations.push_back(std::move(sim));
  }
  std::vector<int> tree_nodes;  // budgets within the measured curve
  for (int n : o.simulate_tree_nodes)
    if (std::min(n, m_max - 1) >= 1 && std::find(tree_nodes.begin(), tree_nodes.end(), std::min(n, m_max - 1)) == tree_nodes.end())
      tree_nodes.push_back(std::min(n, m_max - 1));
  for (const auto& profile : o.simulate_tree_profiles)
    r.tree_simulations.push_back(simulate_tree_vs_chain(profile, tree_nodes, sim_c_draft, sim_source, r.short_curve, r.decode_tps));
  return r;
}

}  // namespace specdec
