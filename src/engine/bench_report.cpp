// engine/bench_report.cpp — the `specdec bench` report as text and as JSON.
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "specdec/bench.h"
#include "specdec/error.h"

namespace specdec {

namespace {

// printf-style append (the report is small; one bounded buffer per line is enough).
[[gnu::format(printf, 2, 3)]] void put(std::string& out, const char* fmt, ...) {
  char buf[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  out += buf;
}

double mib(size_t bytes) { return static_cast<double>(bytes) / 1048576.0; }

// The smallest of the values above 0, and the largest (0 when none is: not measured).
template <typename Values>
double min_positive_of(const Values& values) {
  double least = 0;
  for (double v : values)
    if (v > 0 && (least == 0 || v < least)) least = v;
  return least;
}
template <typename Values>
double max_of(const Values& values) {
  double most = 0;
  for (double v : values) most = std::max(most, v);
  return most;
}

// Whether a hand-off of `ns` is far from the fastest one seen (`fastest` > 0): the threads were
// in another placement (bench.h: kHandoffSpreadNote).
bool far_from(double ns, double fastest) { return fastest > 0 && ns > kHandoffSpreadNote * fastest; }

// The paired decode ratios split by the hand-off before each pair: near (within
// kHandoffSpreadNote of the fastest) and far. Printed only when the run saw both.
void put_paired_by_handoff(std::string& out, const BenchReport& r) {
  const size_t n = r.paired_handoff_ns_each.size();
  if (n == 0 || r.paired_decode_gbs_each.size() != n || r.paired_probe_gbs_each.size() != n) return;
  const double fastest = min_positive_of(r.paired_handoff_ns_each);
  std::vector<double> near, far, near_probe, far_probe;  // ratios and probe GB/s per class
  for (size_t i = 0; i < n; ++i) {
    if (r.paired_probe_gbs_each[i] <= 0) continue;
    const bool is_far = far_from(r.paired_handoff_ns_each[i], fastest);
    (is_far ? far : near).push_back(r.paired_decode_gbs_each[i] / r.paired_probe_gbs_each[i]);
    (is_far ? far_probe : near_probe).push_back(r.paired_probe_gbs_each[i]);
  }
  if (near.empty() || far.empty()) return;
  put(out, "  paired by hand-off: near (<= %.0f ns) median ratio %.3f over %zu pairs (probe %.2f GB/s); far median ratio %.3f over %zu pairs (probe %.2f GB/s)\n",
      kHandoffSpreadNote * fastest, median_of(near), near.size(), median_of(near_probe), median_of(far),
      far.size(), median_of(far_probe));
}

// The report code indexes a curve's five vectors together.
void check_curve(const CostCurve& c, const char* name) {
  const size_t n = c.seconds.size();
  if (c.cost.size() != n || c.min_seconds.size() != n || c.min_cost.size() != n || c.paired_cost.size() != n)
    throw Error(std::string("bench report: the ") + name + " cost curve's vectors differ in length (seconds " +
                std::to_string(n) + ", cost " + std::to_string(c.cost.size()) + ", min_seconds " +
                std::to_string(c.min_seconds.size()) + ", min_cost " + std::to_string(c.min_cost.size()) +
                ", paired_cost " + std::to_string(c.paired_cost.size()) + ")");
}

void check_curves(const BenchReport& r) {
  check_curve(r.short_curve, "short-context");
  check_curve(r.long_curve, "long-context");
}

void put_curves(std::string& out, const BenchReport& r) {
  const bool have_long = !r.long_curve.empty();
  put(out, "\nverify cost c(M) = t(forward of M rows) / t(forward of 1 row); ms and c(M) from medians,\n"
           "c_min(M) from the fastest repeats, c_pair(M) the median of each repeat's t(M) / t(1):\n");
  put(out, "  %3s  %10s %7s %8s %9s", "M", "ms", "c(M)", "c_min(M)", "c_pair(M)");
  if (have_long) put(out, "  %10s %7s %8s %9s", "ms", "c(M)", "c_min(M)", "c_pair(M)");
  put(out, "\n  %3s  %-37s", "", ("context " + std::to_string(r.short_curve.context)).c_str());
  if (have_long)
    put(out, "  %-37s", ("context " + std::to_string(r.long_curve.context)).c_str());
  else
    put(out, "  (long context not measured: --ctx-long not above --ctx-short within the model's context)");
  put(out, "\n");
  for (size_t i = 0; i < r.short_curve.seconds.size(); ++i) {
    put(out, "  %3zu  %10.3f %7.3f %8.3f %9.3f", i + 1, r.short_curve.seconds[i] * 1e3, r.short_curve.cost[i],
        r.short_curve.min_cost[i], r.short_curve.paired_cost[i]);
    if (have_long && i < r.long_curve.seconds.size())
      put(out, "  %10.3f %7.3f %8.3f %9.3f", r.long_curve.seconds[i] * 1e3, r.long_curve.cost[i], r.long_curve.min_cost[i],
          r.long_curve.paired_cost[i]);
    put(out, "\n");
  }
  for (const CostCurve* c : {&r.short_curve, &r.long_curve}) {
    if (c->handoff_ns.empty() || c->empty()) continue;
    const double least = min_positive_of(c->handoff_ns), most = max_of(c->handoff_ns);
    if (least <= 0) continue;
    put(out, "  context %d: thread hand-offs %.0f-%.0f ns before the repeats%s\n", c->context, least, most,
        far_from(most, least) ? " (the threads changed cache domains during this curve: compare c_pair)" : "");
  }
}

// A 1-row forward's time were its weights read at the probe's bandwidth (0: no probe).
double decode_seconds_at_probe(const BenchReport& r) {
  return r.bandwidth_gbs > 0 ? static_cast<double>(r.weight_bytes) / (r.bandwidth_gbs * 1e9) : 0.0;
}

// The products of the first m rows of the long-context curve at peak: the weights' (m row
// floors) and attention's, row i (1-based) seeing context + i keys (0: not measured).
double long_rows_floor_seconds(const BenchReport& r, int m) {
  if (r.row_floor_seconds <= 0 || r.long_curve.empty() || r.compute_peak.f32_gmacs <= 0) return 0.0;
  const double keys = static_cast<double>(m) * r.long_curve.context + 0.5 * m * (m + 1.0);
  return m * r.row_floor_seconds + r.attention_macs_per_key * keys / (r.compute_peak.f32_gmacs * 1e9);
}

// The compute roofline: the measured peak, a row's multiply-adds at that peak, and what that
// bounds (the c(M) floor, the prefill ceiling), with how close the measured rows come.
void put_compute_roofline(std::string& out, const BenchReport& r) {
  const ComputePeak& p = r.compute_peak;
  if (r.row_floor_seconds <= 0) {
    put(out, "compute peak: not measured (scalar path)\n");
    return;
  }
  put(out, "compute peak (same run, all threads, best pass of two probes): 8-bit products %.1f GMAC/s (%s), f32 FMA %.1f GMAC/s (%s)\n",
      p.int8_gmacs, p.int8_instruction.c_str(), p.f32_gmacs, p.f32_instruction.c_str());
  const double floor_ratio = r.row_floor_seconds / r.decode_seconds;
  put(out, "  a forward row's weight multiply-adds: %.2f M 8-bit + %.2f M f32 -> %.4f ms at peak = %.3f of a decode row\n",
      r.int8_macs_per_row / 1e6, r.f32_macs_per_row / 1e6, r.row_floor_seconds * 1e3, floor_ratio);
  put(out, "  roofline (the products alone, at peak): c(M) >= max(1, %.3f M); prefill <= %.0f tok/s = %.1fx decode\n",
      floor_ratio, 1.0 / r.row_floor_seconds, 1.0 / floor_ratio);
  // The same bounds for a decode that read its weights at the probe's full bandwidth: what any
  // kernel on this machine could reach for c(M) and prefill / decode together with a decode
  // bandwidth target (a faster decode raises c(M) and lowers prefill / decode at equal products).
  const double probe_decode_seconds = decode_seconds_at_probe(r);
  if (probe_decode_seconds > 0) {
    const double probe_floor_ratio = r.row_floor_seconds / probe_decode_seconds;
    put(out, "  with a decode at the probe's bandwidth (%.3f ms): c(M) >= max(1, %.3f M); prefill <= %.1fx decode\n",
        probe_decode_seconds * 1e3, probe_floor_ratio, 1.0 / probe_floor_ratio);
  }
  // Share of the peak: the products of the rows at peak over the measured time (weight streaming,
  // unpacking, scaling, attention and the rest fill the remainder).
  const std::vector<double>& t = r.short_curve.seconds;
  if (!t.empty()) {
    const size_t m = t.size();
    const double rows_share = static_cast<double>(m) * r.row_floor_seconds / t.back();
    const double prefill_share = r.row_floor_seconds * r.prefill_tps;
    put(out, "  measured: t(%zu) = %.3f ms -> the products of its %zu rows ran at %.0f%% of peak", m, t.back() * 1e3, m,
        100.0 * rows_share);
    if (r.prefill_tps > 0) put(out, "; prefill at %.0f%%", 100.0 * prefill_share);
    put(out, "\n");
    const bool amx = r.isa.find("+amx") != std::string::npos;  // tile products: not what the probe times
    if (amx) {
      put(out, "  (AMX on: prefill-sized products run on AMX tiles, which the probe does not time; shares above 100%% are possible)\n");
    } else if (rows_share > 1.0 || prefill_share > 1.0) {
      put(out, "  WARNING: a share above 100%%: both probe runs were slowed (another tenant?); the peak is understated, rerun\n");
    }
  }
  // The long context: each row's attention adds f32 products in proportion to the keys it sees
  // (scores and weighted sums), which no verify shares between rows.
  const std::vector<double>& t_long = r.long_curve.seconds;
  if (!t_long.empty() && r.attention_macs_per_key > 0) {
    const int context = r.long_curve.context, m = static_cast<int>(t_long.size());
    const double one_row = long_rows_floor_seconds(r, 1);
    put(out, "  at context %d: attention's %.0f f32 multiply-adds per visible key make a row's products %.4f ms at peak; "
             "c(M) >= max(1, %.3f M) there\n",
        context, r.attention_macs_per_key, one_row * 1e3, one_row / t_long[0]);
    put(out, "  measured: t(%d) = %.3f ms at context %d -> the products of its %d rows (weights and attention) ran at %.0f%% of peak\n",
        m, t_long.back() * 1e3, context, m, 100.0 * long_rows_floor_seconds(r, m) / t_long.back());
  }
}

void put_end_to_end(std::string& out, const EndToEndReport& e) {
  if (e.drafter.empty()) return;
  put(out, "\nend to end, plain vs speculative in the same run (drafter %s, %d prompts x %d repeats, %s):\n",
      e.drafter.c_str(), e.n_prompts, e.reps, e.greedy ? "greedy" : "sampled");
  put(out, "  plain %.2f tok/s (%lld tokens), speculative %.2f tok/s (%lld tokens)\n", e.plain_tps(),
      static_cast<long long>(e.plain_tokens), e.spec_tps(), static_cast<long long>(e.spec_tokens));
  put(out, "  speedup %.3fx (median of per-repeat ratios:", e.speedup_median);
  for (double s : e.speedup_per_rep) put(out, " %.3f", s);
  put(out, ")\n");
  const SpecStats& s = e.spec_stats;
  put(out, "  target passes %lld, drafted %lld, accepted %lld: acceptance %.3f, mean tokens per target pass %.3f\n",
      static_cast<long long>(s.n_target_passes), static_cast<long long>(s.n_drafted),
      static_cast<long long>(s.n_accepted), s.acceptance_rate(), s.mean_tokens_per_pass());
  put(out, "  c_draft %.4f, verify_cost %.3f (decoder's own measurements, mean over requests; 0 = not measured)%s\n",
      e.c_draft, e.verify_cost, s.lossy ? " LOSSY (lenience < 1)" : "");
  const auto by_pos = s.acceptance_by_position();
  if (!by_pos.empty()) {
    put(out, "  acceptance by draft position:");
    for (size_t k = 0; k < by_pos.size() && k < 16; ++k) put(out, " %zu:%.2f", k + 1, by_pos[k]);
    put(out, "\n");
  }
  if (e.greedy)
    put(out, "  greedy outputs identical to plain: %s (%d of %d requests differ)\n", e.n_outputs_differ ? "NO" : "yes",
        e.n_outputs_differ, e.n_prompts * e.reps);
}

void put_simulations(std::string& out, const BenchReport& r) {
  if (r.simulations.empty()) return;
  put(out,
      "\nSIMULATION (predicted, not measured decoding): acceptance forced at rate alpha per draft position;\n"
      "  E[tokens](K) = (1 - alpha^(K+1)) / (1 - alpha), speedup(K) = E[tokens](K) / (K * c_draft + c(K+1))\n"
      "  with c(M) measured above%s.\n",
      r.simulate_loop_tokens > 0 ? "; 'loop' = real target forwards with forced acceptance, drafting charged" : "");
  for (const Simulation& sim : r.simulations) {
    put(out, "  SIMULATION alpha %.2f, c_draft %.4f (%s):\n", sim.alpha, sim.c_draft, sim.c_draft_source.c_str());
    put(out, "    %2s %9s %13s", "K", "E[tokens]", "speedup@short");
    const bool have_long = !r.long_curve.empty();
    if (have_long) put(out, " %12s", "speedup@long");
    if (r.simulate_loop_tokens > 0) put(out, " %12s", "loop@short");
    put(out, "\n");
    for (const SimulatedPoint& p : sim.points) {
      put(out, "    %2d %9.3f %13.3f", p.k, p.expected_tokens, p.speedup_short);
      if (have_long) put(out, " %12.3f", p.speedup_long);
      if (r.simulate_loop_tokens > 0) put(out, " %12.3f", p.loop_speedup);
      put(out, "\n");
    }
    put(out, "    best K: %d at the short context", sim.best_k_short);
    if (have_long) put(out, ", %d at the long context", sim.best_k_long);
    put(out, "\n");
  }
}

void put_tree_simulations(std::string& out, const BenchReport& r) {
  if (r.tree_simulations.empty()) return;
  put(out,
      "\nSIMULATION, token trees (predicted, not measured decoding): positional acceptance profile\n"
      "  alpha_r = P(the r-th most probable child of a node is the accepted one), r = 0..W-1, at every node;\n"
      "  chain = N nodes at alpha_0 (N draft forwards), tree = the best-first tree of N nodes (optimal under\n"
      "  the model; one draft forward per level). E[tokens] per target pass = 1 + sum over nodes of the\n"
      "  product of alpha along the path; speedup = E / (draft forwards * c_draft + c(N+1)) with c(M) measured\n"
      "  above at context %d; tok/s = decode tok/s * speedup.\n",
      r.short_curve.context);
  for (const TreeSimulation& sim : r.tree_simulations) {
    put(out, "  SIMULATION profile");
    for (double a : sim.profile) put(out, " %.3f", a);
    put(out, ", c_draft %.4f (%s):\n", sim.c_draft, sim.c_draft_source.c_str());
    put(out, "    %3s %8s %8s %6s %6s %7s %11s %11s %8s\n", "N", "chain E", "tree E", "depth", "root-W", "c(N+1)",
        "chain tok/s", "tree tok/s", "tree/ch");
    for (const TreeSimPoint& p : sim.points)
      put(out, "    %3d %8.3f %8.3f %6d %6d %7.3f %11.2f %11.2f %8.3f\n", p.nodes, p.chain_tokens, p.tree_tokens,
          p.tree_depth, p.tree_root_children, p.verify_cost, p.chain_tps, p.tree_tps,
          p.chain_tps > 0 ? p.tree_tps / p.chain_tps : 0.0);
  }
}

nlohmann::json end_to_end_json(const EndToEndReport& e) {
  const SpecStats& s = e.spec_stats;
  return {{"drafter", e.drafter},
          {"prompts", e.n_prompts},
          {"reps", e.reps},
          {"greedy", e.greedy},
          {"plain_tokens", e.plain_tokens},
          {"plain_seconds", e.plain_seconds},
          {"plain_tokens_per_second", e.plain_tps()},
          {"spec_tokens", e.spec_tokens},
          {"spec_seconds", e.spec_seconds},
          {"spec_tokens_per_second", e.spec_tps()},
          {"speedup_per_rep", e.speedup_per_rep},
          {"speedup_median", e.speedup_median},
          {"target_passes", s.n_target_passes},
          {"drafted", s.n_drafted},
          {"accepted", s.n_accepted},
          {"acceptance_rate", s.acceptance_rate()},
          {"mean_tokens_per_pass", s.mean_tokens_per_pass()},
          {"acceptance_by_position", s.acceptance_by_position()},
          {"c_draft", e.c_draft},
          {"verify_cost", e.verify_cost},
          {"lossy", s.lossy},
          {"outputs_differ", e.n_outputs_differ}};
}

nlohmann::json curve_json(const CostCurve& c) {
  return {{"context", c.context},   {"seconds", c.seconds},         {"cost", c.cost},
          {"min_seconds", c.min_seconds}, {"min_cost", c.min_cost}, {"paired_cost", c.paired_cost},
          {"handoff_ns", c.handoff_ns}};
}

}  // namespace

// Per-phase µs per forward for each profiled M, and each phase's share of the forward.
void put_profiles(std::string& out, const BenchReport& r) {
  std::vector<std::pair<std::string, const ForwardProfile*>> columns;  // (heading, profile)
  for (const auto& [m, p] : r.profiles) columns.emplace_back("M = " + std::to_string(m), &p);
  if (r.prefill_profile.forwards > 0) columns.emplace_back("prefill " + std::to_string(r.prefill_chunk), &r.prefill_profile);
  if (columns.empty()) return;
  put(out, "\nprofile: wall time per forward by phase, µs (share of the forward); M rows at context %d, "
      "the prefill chunk from position 0\n", r.short_curve.context);
  put(out, "  %-12s", "phase");
  for (const auto& column : columns) put(out, "  %15s", column.first.c_str());
  put(out, "\n");
  const auto row = [&](const char* name, auto ns_of) {
    put(out, "  %-12s", name);
    for (const auto& column : columns) {
      const ForwardProfile& p = *column.second;
      const double n = static_cast<double>(std::max<int64_t>(p.forwards, 1));
      put(out, "  %8.1f (%3.0f%%)", static_cast<double>(ns_of(p)) / n / 1e3,
          p.total_ns > 0 ? 100.0 * static_cast<double>(ns_of(p)) / static_cast<double>(p.total_ns) : 0.0);
    }
    put(out, "\n");
  };
  for (int phase = 0; phase < ForwardProfile::kPhases; ++phase)
    row(ForwardProfile::name(phase), [phase](const ForwardProfile& p) { return p.ns[phase]; });
  row("other", [](const ForwardProfile& p) { return p.other_ns(); });
  row("total", [](const ForwardProfile& p) { return p.total_ns; });
}

std::string bench_report_text(const BenchReport& r) {
  check_curves(r);
  std::string out;
  put(out, "specdec bench: %s%s%s\n", r.model_path.c_str(), r.model_name.empty() ? "" : " ",
      r.model_name.empty() ? "" : ("(" + r.model_name + ")").c_str());
  put(out, "  %s, ISA %s (decode prefetch %s, verify prefetch %s), %d threads, medians of %d repeats, load average %.2f at start\n",
      r.date.c_str(), r.isa.c_str(), r.decode_prefetch.c_str(), r.verify_prefetch.c_str(), r.n_threads, r.reps,
      r.load_average_1min);
  put(out, "  %d layers, %d dim, vocab %d, context %d; tensors %s\n", r.n_layers, r.n_embd, r.n_vocab, r.n_ctx,
      r.weight_types.c_str());
  if (r.handoff_ns_start > 0)
    put(out, "  thread hand-off (a write reaching the slowest worker, one way): %.0f ns before the measurements, %.0f ns after\n",
        r.handoff_ns_start, r.handoff_ns_end);
  if (r.pool_inline_calls > 0)
    put(out, "  WARNING: after %lld stalls (a worker held up a call: other tenants, or more threads than free cores) "
             "the thread pool ran %lld parallel calls on the calling thread alone: some figures below are partly single-threaded\n",
        static_cast<long long>(r.pool_stalls), static_cast<long long>(r.pool_inline_calls));
  put(out, "\ndecode (1-row forward at context %d): %.2f tok/s (%.3f ms/token)\n", r.short_curve.context, r.decode_tps,
      r.decode_seconds * 1e3);
  put(out, "  weights read per token %.1f MiB -> achieved %.2f GB/s\n", mib(r.weight_bytes), r.achieved_gbs);
  if (r.decode_min_seconds > 0)
    put(out, "  fastest repeat: %.2f tok/s, %.2f GB/s\n", 1.0 / r.decode_min_seconds,
        static_cast<double>(r.weight_bytes) / r.decode_min_seconds / 1e9);
  if (r.bandwidth_gbs > 0)
    put(out, "  measured read bandwidth (same run, all threads, best pass of plain and prefetching loops) %.2f GB/s -> ratio %.3f\n", r.bandwidth_gbs,
        r.bandwidth_ratio);
  else
    put(out, "  read bandwidth probe skipped\n");
  if (r.paired_count > 0) {
    put(out, "  paired (probe pass, then a decode repeat; %d pairs): median ratio %.3f (decode %.2f GB/s, probe %.2f GB/s)",
        r.paired_count, r.paired_ratio, r.paired_decode_gbs, r.paired_probe_gbs);
    if (max_of(r.paired_handoff_ns_each) > 0)
      put(out, "; hand-offs %.0f-%.0f ns", min_positive_of(r.paired_handoff_ns_each), max_of(r.paired_handoff_ns_each));
    put(out, "\n");
    put_paired_by_handoff(out, r);
    if (r.paired_probe_max_gbs > kProbeSpreadNote * r.paired_probe_min_gbs)
      put(out, "  NOTE: the probe passes read %.2f-%.2f GB/s: the memory's speed moved during this run, so compare figures within pairs (the paired ratios), not across lines\n",
          r.paired_probe_min_gbs, r.paired_probe_max_gbs);
  }
  std::vector<double> handoffs = r.paired_handoff_ns_each;  // every hand-off figure of the run
  handoffs.insert(handoffs.end(), {r.handoff_ns_start, r.handoff_ns_end});
  for (const CostCurve* c : {&r.short_curve, &r.long_curve}) handoffs.insert(handoffs.end(), c->handoff_ns.begin(), c->handoff_ns.end());
  const double handoff_min = min_positive_of(handoffs), handoff_max = max_of(handoffs);
  if (far_from(handoff_max, handoff_min)) {
    put(out, "  NOTE: the thread hand-off moved between %.0f and %.0f ns during this run: the system moved the threads between "
             "cache domains (cores sharing a last-level cache hand off in tens of ns, across CCDs or sockets in hundreds), "
             "which moves the memory's speed and the cost of every parallel call with it (docs/BENCHMARKS.md 55)\n",
        handoff_min, handoff_max);
  }
  put_compute_roofline(out, r);
  if (!r.long_curve.empty())
    put(out, "decode at context %d: %.2f tok/s\n", r.long_curve.context, r.decode_tps_long);
  put(out, "prefill (%d-token chunk from position 0%s): %.1f tok/s = %.2fx decode\n", r.prefill_chunk,
      r.prefill_splits_rows ? ", rows split between the threads" : "", r.prefill_tps, r.prefill_over_decode);
  if (r.prefill_paired_count > 0)
    put(out, "  paired (a prefill chunk, then a decode repeat; %d pairs): median ratio %.2fx (prefill %.1f tok/s, decode %.2f tok/s)\n",
        r.prefill_paired_count, r.prefill_paired_ratio, r.prefill_paired_tps, r.prefill_paired_decode_tps);
  if (r.fill_tps > 0)
    put(out, "  filling the cache %d -> %d in chunks: %.1f tok/s\n", r.short_curve.context, r.long_curve.context,
        r.fill_tps);
  put_curves(out, r);
  put_profiles(out, r);
  const MemoryReport& m = r.memory;
  put(out, "\nmemory: peak RSS %.1f MiB (current %.1f) vs mapped file %.1f MiB + KV cache %.1f MiB (%s)", mib(m.peak_rss_bytes),
      mib(m.rss_bytes), mib(m.mapped_file_bytes), mib(m.kv_cache_bytes), m.kv_type.c_str());
  if (m.draft_bytes) put(out, " + draft %.1f MiB", mib(m.draft_bytes));
  const double expected = static_cast<double>(m.mapped_file_bytes + m.kv_cache_bytes + m.draft_bytes);
  put(out, " -> ratio %.3f (target <= 1.10), %.1f MiB above\n", m.ratio(),
      (static_cast<double>(m.peak_rss_bytes) - expected) / 1048576.0);
  if (r.draft_decode_seconds > 0)
    put(out, "draft model: 1-row forward %.3f ms -> c_draft %.4f (draft forward / target forward)\n",
        r.draft_decode_seconds * 1e3, r.c_draft_forward);
  put_end_to_end(out, r.end_to_end);
  if (!r.end_to_end_chain.drafter.empty()) {
    put(out, "\nthe same drafter as a chain at the tree's node budget (--compare-chain):");
    put_end_to_end(out, r.end_to_end_chain);
  }
  put_simulations(out, r);
  put_tree_simulations(out, r);
  return out;
}

std::string bench_report_json(const BenchReport& r) {
  check_curves(r);
  nlohmann::json j;
  j["model"] = {{"path", r.model_path}, {"name", r.model_name},   {"n_layers", r.n_layers},
                {"n_embd", r.n_embd},   {"n_vocab", r.n_vocab},    {"n_ctx", r.n_ctx},
                {"tensor_types", r.weight_types}, {"weight_bytes_per_token", r.weight_bytes}};
  j["run"] = {{"date", r.date}, {"isa", r.isa}, {"decode_prefetch", r.decode_prefetch}, {"verify_prefetch", r.verify_prefetch}, {"threads", r.n_threads}, {"reps", r.reps},
              {"load_average_1min", r.load_average_1min}, {"pool_stalls", r.pool_stalls},
              {"pool_inline_calls", r.pool_inline_calls}, {"handoff_ns_start", r.handoff_ns_start},
              {"handoff_ns_end", r.handoff_ns_end}};
  j["decode"] = {{"context", r.short_curve.context},      {"seconds_per_token", r.decode_seconds},
                 {"tokens_per_second", r.decode_tps},     {"tokens_per_second_long", r.decode_tps_long},
                 {"min_seconds_per_token", r.decode_min_seconds},
                 {"achieved_gbs", r.achieved_gbs},        {"bandwidth_gbs", r.bandwidth_gbs},
                 {"bandwidth_ratio", r.bandwidth_ratio}};
  if (r.paired_count > 0)
    j["decode"]["bandwidth_paired"] = {{"pairs", r.paired_count},
                                       {"ratio", r.paired_ratio},
                                       {"decode_gbs", r.paired_decode_gbs},
                                       {"probe_gbs", r.paired_probe_gbs},
                                       {"probe_min_gbs", r.paired_probe_min_gbs},
                                       {"probe_max_gbs", r.paired_probe_max_gbs},
                                       {"handoff_min_ns", min_positive_of(r.paired_handoff_ns_each)},
                                       {"handoff_max_ns", max_of(r.paired_handoff_ns_each)},
                                       {"decode_gbs_each", r.paired_decode_gbs_each},
                                       {"probe_gbs_each", r.paired_probe_gbs_each},
                                       {"handoff_ns_each", r.paired_handoff_ns_each}};
  if (r.row_floor_seconds > 0)
    j["compute_roofline"] = {{"int8_gmacs", r.compute_peak.int8_gmacs},
                             {"int8_instruction", r.compute_peak.int8_instruction},
                             {"f32_gmacs", r.compute_peak.f32_gmacs},
                             {"f32_instruction", r.compute_peak.f32_instruction},
                             {"int8_macs_per_row", r.int8_macs_per_row},
                             {"f32_macs_per_row", r.f32_macs_per_row},
                             {"row_floor_seconds", r.row_floor_seconds}};
  if (r.row_floor_seconds > 0 && !r.long_curve.empty()) {
    j["compute_roofline"]["attention_macs_per_key"] = r.attention_macs_per_key;
    j["compute_roofline"]["long_rows_floor_seconds"] = long_rows_floor_seconds(r, static_cast<int>(r.long_curve.seconds.size()));
  }
  if (r.row_floor_seconds > 0 && decode_seconds_at_probe(r) > 0)
    j["compute_roofline"]["decode_seconds_at_probe"] = decode_seconds_at_probe(r);
  j["prefill"] = {{"chunk", r.prefill_chunk}, {"splits_rows", r.prefill_splits_rows}, {"tokens_per_second", r.prefill_tps},
                  {"over_decode", r.prefill_over_decode}, {"fill_tokens_per_second", r.fill_tps}};
  if (r.prefill_paired_count > 0)
    j["prefill"]["paired"] = {{"pairs", r.prefill_paired_count},
                              {"over_decode", r.prefill_paired_ratio},
                              {"tokens_per_second", r.prefill_paired_tps},
                              {"decode_tokens_per_second", r.prefill_paired_decode_tps}};
  j["cost_curve"] = {{"short", curve_json(r.short_curve)}};
  if (!r.long_curve.empty()) j["cost_curve"]["long"] = curve_json(r.long_curve);
  const MemoryReport& m = r.memory;
  j["memory"] = {{"peak_rss_bytes", m.peak_rss_bytes}, {"rss_bytes", m.rss_bytes},
                 {"mapped_file_bytes", m.mapped_file_bytes}, {"kv_cache_bytes", m.kv_cache_bytes}, {"kv_type", m.kv_type},
                 {"draft_bytes", m.draft_bytes}, {"ratio", m.ratio()}};
  if (r.draft_decode_seconds > 0)
    j["draft_model"] = {{"seconds_per_token", r.draft_decode_seconds}, {"c_draft", r.c_draft_forward}};
  const auto profile_json = [](int rows, const ForwardProfile& p) {
    nlohmann::json phases;
    for (int phase = 0; phase < ForwardProfile::kPhases; ++phase) phases[ForwardProfile::name(phase)] = p.ns[phase];
    phases["other"] = p.other_ns();
    return nlohmann::json{{"rows", rows}, {"forwards", p.forwards}, {"total_ns", p.total_ns}, {"phase_ns", phases}};
  };
  for (const auto& [m, p] : r.profiles) j["profile"].push_back(profile_json(m, p));
  if (r.prefill_profile.forwards > 0) j["prefill_profile"] = profile_json(r.prefill_chunk, r.prefill_profile);
  if (!r.end_to_end.drafter.empty()) j["end_to_end"] = end_to_end_json(r.end_to_end);
  if (!r.end_to_end_chain.drafter.empty()) j["end_to_end_chain"] = end_to_end_json(r.end_to_end_chain);
  nlohmann::json sims = nlohmann::json::array();
  for (const Simulation& sim : r.simulations) {
    nlohmann::json points = nlohmann::json::array();
    for (const SimulatedPoint& p : sim.points)
      points.push_back({{"k", p.k}, {"expected_tokens", p.expected_tokens}, {"speedup_short", p.speedup_short},
                        {"speedup_long", p.speedup_long}, {"loop_speedup", p.loop_speedup}});
    sims.push_back({{"label", "SIMULATION"}, {"alpha", sim.alpha}, {"c_draft", sim.c_draft},
                    {"c_draft_source", sim.c_draft_source}, {"best_k_short", sim.best_k_short},
                    {"best_k_long", sim.best_k_long}, {"loop_tokens", r.simulate_loop_tokens}, {"points", points}});
  }
  j["simulation"] = sims;
  nlohmann::json trees = nlohmann::json::array();
  for (const TreeSimulation& sim : r.tree_simulations) {
    nlohmann::json points = nlohmann::json::array();
    for (const TreeSimPoint& p : sim.points)
      points.push_back({{"nodes", p.nodes}, {"chain_tokens", p.chain_tokens}, {"tree_tokens", p.tree_tokens},
                        {"tree_depth", p.tree_depth}, {"tree_root_children", p.tree_root_children},
                        {"verify_cost", p.verify_cost}, {"chain_speedup", p.chain_speedup},
                        {"tree_speedup", p.tree_speedup}, {"chain_tokens_per_second", p.chain_tps},
                        {"tree_tokens_per_second", p.tree_tps}});
    trees.push_back({{"label", "SIMULATION"}, {"profile", sim.profile}, {"c_draft", sim.c_draft},
                     {"c_draft_source", sim.c_draft_source}, {"points", points}});
  }
  j["tree_simulation"] = trees;
  return j.dump(2) + "\n";
}

}  // namespace specdec
