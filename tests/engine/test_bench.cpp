// The bench library: the speedup model, the cost curve on real forwards, the forced-acceptance
// loop, and whole runs on stories260K (lookup) and a random model with a noisy-copy draft,
// checking the report's structure and sanity (never its timings), the JSON and the SVG.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <memory>
#include <string>
#include <vector>

#include "common/testing.h"
#include "common/tiny_model.h"
#include "specdec/bandwidth.h"
#include "specdec/bench.h"
#include "specdec/error.h"
#include "specdec/cpu.h"
#include "specdec/model.h"
#include "specdec/make_model.h"

namespace specdec {
namespace {

// Well-formedness of the SVG we write: every tag closed in order, attributes quoted, one root.
// Returns "" when fine, else what is wrong.
std::string check_xml(const std::string& doc) {
  std::vector<std::string> open;
  size_t i = 0, n_roots = 0;
  while ((i = doc.find('<', i)) != std::string::npos) {
    const size_t end = doc.find('>', i);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(i);
    const std::string tag = doc.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '?') continue;  // XML declaration
    size_t quotes = 0;
    for (char c : tag) quotes += c == '"';
    if (quotes % 2) return "unbalanced quotes in <" + tag + ">";
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return "</" + name + "> closes " + (open.empty() ? "nothing" : open.back());
      open.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" \n/"));
    if (open.empty()) ++n_roots;
    if (tag.back() != '/') open.push_back(name);
  }
  if (!open.empty()) return "<" + open.back() + "> never closed";
  if (n_roots != 1) return std::to_string(n_roots) + " root elements";
  // Text between tags must not contain a raw '&' that is not an entity.
  for (size_t a = doc.find('&'); a != std::string::npos; a = doc.find('&', a + 1))
    if (doc.find(';', a) == std::string::npos || doc.find(';', a) - a > 6) return "raw & at " + std::to_string(a);
  return "";
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t i = text.find(what); i != std::string::npos; i = text.find(what, i + 1)) ++n;
  return n;
}

size_t file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  return static_cast<size_t>(in.tellg());
}

BenchOptions tiny_options(const std::string& model) {
  BenchOptions o;
  o.engine.model_path = model;
  o.engine.n_threads = 2;
  o.reps = 1;
  o.min_rep_seconds = 0;
  o.m_max = 6;
  o.prefill_chunk = 32;
  o.bandwidth_bytes = size_t{2} << 20;
  o.bandwidth_passes = 1;
  o.max_tokens = 12;
  return o;
}

void expect_sane_curve(const CostCurve& c, int m_max, int context) {
  ASSERT_EQ(c.seconds.size(), static_cast<size_t>(m_max));
  ASSERT_EQ(c.cost.size(), static_cast<size_t>(m_max));
  ASSERT_EQ(c.paired_cost.size(), static_cast<size_t>(m_max));
  EXPECT_EQ(c.context, context);
  EXPECT_EQ(c.cost[0], 1.0);
  for (int m = 0; m < m_max; ++m) {
    EXPECT_GT(c.seconds[m], 0.0) << "M = " << m + 1;
    EXPECT_GT(c.cost[m], 0.0) << "M = " << m + 1;
    EXPECT_DOUBLE_EQ(c.cost[m], c.seconds[m] / c.seconds[0]);
    EXPECT_LE(c.min_seconds[m], c.seconds[m]) << "the fastest repeat is never slower than the median";
    EXPECT_DOUBLE_EQ(c.min_cost[m], c.min_seconds[m] / c.min_seconds[0]);
    EXPECT_GT(c.paired_cost[m], 0.0) << "M = " << m + 1;
  }
  EXPECT_EQ(c.min_cost[0], 1.0);
  EXPECT_EQ(c.paired_cost[0], 1.0);
}

TEST(BenchModel, ExpectedTokensMatchesTheGeometricSum) {
  EXPECT_DOUBLE_EQ(expected_tokens(0.0, 5), 1.0);
  EXPECT_DOUBLE_EQ(expected_tokens(1.0, 4), 5.0);
  EXPECT_DOUBLE_EQ(expected_tokens(0.5, 2), 1.75);
  // 1 + a + a^2 + a^3 summed directly
  EXPECT_NEAR(expected_tokens(0.8, 3), 1 + 0.8 + 0.64 + 0.512, 1e-12);
  EXPECT_THROW(expected_tokens(1.5, 2), Error);
  EXPECT_THROW(expected_tokens(-0.1, 2), Error);
}

TEST(BenchModel, SimulatedSpeedupUsesTheMeasuredCosts) {
  CostCurve short_curve, long_curve;
  for (int m = 1; m <= 9; ++m) {
    short_curve.cost.push_back(1.0 + 0.1 * (m - 1));  // c(M) = 1 + 0.1 (M - 1)
    long_curve.cost.push_back(1.0 + 0.5 * (m - 1));
  }
  const Simulation sim = simulate_speedup(0.8, 0.05, "given", short_curve, long_curve, 8);
  ASSERT_EQ(sim.points.size(), 8u);
  for (const SimulatedPoint& p : sim.points) {
    const double e = expected_tokens(0.8, p.k);
    EXPECT_DOUBLE_EQ(p.speedup_short, e / (p.k * 0.05 + 1.0 + 0.1 * p.k));
    EXPECT_DOUBLE_EQ(p.speedup_long, e / (p.k * 0.05 + 1.0 + 0.5 * p.k));
  }
  // The best K maximizes the predicted speedup; a steeper c(M) never favours a longer draft.
  for (const SimulatedPoint& p : sim.points) {
    EXPECT_LE(p.speedup_short, sim.points[sim.best_k_short - 1].speedup_short);
    EXPECT_LE(p.speedup_long, sim.points[sim.best_k_long - 1].speedup_long);
  }
  EXPECT_LE(sim.best_k_long, sim.best_k_short);
  EXPECT_THROW(simulate_speedup(0.8, 0.0, "given", short_curve, long_curve, 9), Error);  // needs c(10)
  EXPECT_THROW(simulate_speedup(0.8, -1.0, "given", short_curve, long_curve, 4), Error);
}

// A tiny random Llama (testing::TinyModelSpec) written to `name`, loaded with 2 threads.
std::unique_ptr<Transformer> random_model(const std::string& name) {
  testing::TinyModelSpec spec;
  ModelOptions mo;
  mo.n_threads = 2;
  return Transformer::load(testing::make_random_llama(name, spec), mo);
}

TEST(BenchMeasure, CostCurveAndForcedLoopOnARandomModel) {
  auto model = random_model("bench-curve.gguf");
  KvCache cache = model->new_cache(64);
  EXPECT_GT(time_prefill_chunk(*model, cache, 20, 2, 0.0), 0.0);
  EXPECT_EQ(cache.size(), 0);
  EXPECT_GT(time_forward(*model, cache, 0, 10, 1, 0.0), 0.0);  // leaves the cache at 0 rows
  EXPECT_EQ(cache.size(), 0);
  // Put 10 committed rows in, then the curve at context 10 must leave them there.
  Batch batch;
  for (int i = 0; i < 10; ++i) batch.add(5 + i, i, i - 1, 0, i == 9);
  Logits logits;
  KvCache* caches[] = {&cache};
  model->forward(batch, caches, logits);
  const CostCurve curve = measure_cost_curve(*model, cache, 7, 2, 0.0);
  expect_sane_curve(curve, 7, 10);
  EXPECT_EQ(cache.size(), 10);
  for (double alpha : {0.0, 0.5, 1.0}) {
    EXPECT_GT(forced_acceptance_tps(*model, cache, alpha, 3, 1e-6, 12, 7), 0.0);
    EXPECT_EQ(cache.size(), 10);
  }
  EXPECT_THROW(forced_acceptance_tps(*model, cache, 0.5, 3, 0.0, 60, 7), Error);  // past capacity
  EXPECT_THROW(measure_cost_curve(*model, cache, 60, 1, 0.0), Error);
  EXPECT_THROW(time_forward(*model, cache, 0, 1, 0, 0.0), Error);  // zero repeats
}

// --profile: the phases of a forward add up (with "other") to its time, every phase of a
// layer is seen, profiling changes no logit, and the cache is left as it was.
TEST(BenchMeasure, ProfileSplitsAForwardIntoItsPhases) {
  auto model = random_model("bench-profile.gguf");
  KvCache cache = model->new_cache(64);
  Batch batch;
  for (int i = 0; i < 6; ++i) batch.add(3 + i, i, i - 1, 0, true);
  Logits plain, profiled;
  KvCache* caches[] = {&cache};
  model->forward(batch, caches, plain);
  cache.truncate(0);
  ForwardProfile direct;
  model->set_profile(&direct);
  model->forward(batch, caches, profiled);
  model->set_profile(nullptr);
  EXPECT_EQ(plain.data, profiled.data);
  EXPECT_EQ(direct.forwards, 1);
  for (int phase = 0; phase < ForwardProfile::kPhases; ++phase)
    EXPECT_GT(direct.ns[phase], 0) << ForwardProfile::name(phase);
  EXPECT_GE(direct.other_ns(), 0);
  cache.truncate(4);
  const ForwardProfile p = profile_forward(*model, cache, 5, 3, 0.0);
  EXPECT_EQ(cache.size(), 4);
  EXPECT_GE(p.forwards, 3);
  EXPECT_GE(p.other_ns(), 0);  // the phases lie inside the forwards' time
  EXPECT_GT(p.total_ns, 0);
  EXPECT_GT(p.ns[ForwardProfile::kNormGateUp], 0);
  EXPECT_STREQ(ForwardProfile::name(ForwardProfile::kAttention), "attention");
  EXPECT_THROW(profile_forward(*model, cache, 61, 1, 0.0), Error);  // past capacity
}

// The paired bandwidth figure: one probe pass and one decode repeat per pair, medians of each
// and of the per-pair ratios; the cache is left as it was.
TEST(BenchMeasure, PairedBandwidthInterleavesProbePassesAndDecodeRepeats) {
  auto model = random_model("bench-paired.gguf");
  KvCache cache = model->new_cache(32);
  ReadBandwidthProbe probe(model->pool(), size_t{4} << 20);
  EXPECT_EQ(probe.bytes() % 4096, 0u);
  const PairedBandwidth p = measure_paired_bandwidth(*model, cache, probe, 3, 0.0);
  EXPECT_EQ(p.pairs, 3);
  EXPECT_GT(p.probe_gbs, 0.0);
  EXPECT_GT(p.decode_gbs, 0.0);
  EXPECT_GT(p.ratio, 0.0);
  EXPECT_GT(p.probe_min_gbs, 0.0);  // the passes' range holds their median
  EXPECT_LE(p.probe_min_gbs, p.probe_gbs);
  EXPECT_GE(p.probe_max_gbs, p.probe_gbs);
  ASSERT_EQ(p.handoff_ns_each.size(), 3u);  // one hand-off measurement and figure per pair
  EXPECT_EQ(p.decode_gbs_each.size(), 3u);
  EXPECT_EQ(p.probe_gbs_each.size(), 3u);
  for (double ns : p.handoff_ns_each) EXPECT_GT(ns, 0.0);  // the model's pool has 2 threads
  EXPECT_EQ(cache.size(), 0);
  EXPECT_THROW(measure_paired_bandwidth(*model, cache, probe, 0, 0.0), Error);
  EXPECT_THROW(ReadBandwidthProbe(model->pool(), 1000), Error);  // below 1 MiB
}

// The paired prefill figure: one prefill forward (its own cache, left empty) and one decode
// repeat per pair, medians of each and of the per-pair ratios; the decode's cache is left as it
// was. Each ratio is its own pair's: the median ratio need not equal the ratio of the medians.
TEST(BenchMeasure, PairedPrefillInterleavesPrefillChunksAndDecodeRepeats) {
  auto model = random_model("bench-paired-prefill.gguf");
  KvCache cache = model->new_cache(32);
  KvCache prefill_cache = model->new_cache(20);
  Batch batch;
  for (int i = 0; i < 4; ++i) batch.add(5 + i, i, i - 1, 0, i == 3);
  Logits logits;
  KvCache* caches[] = {&cache};
  model->forward(batch, caches, logits);
  const PairedPrefill p = measure_paired_prefill(*model, cache, prefill_cache, 20, 3, 0.0);
  EXPECT_EQ(p.pairs, 3);
  EXPECT_GT(p.prefill_tps, 0.0);
  EXPECT_GT(p.decode_tps, 0.0);
  EXPECT_GT(p.ratio, 0.0);
  EXPECT_EQ(cache.size(), 4);
  EXPECT_EQ(prefill_cache.size(), 0);
  EXPECT_THROW(measure_paired_prefill(*model, cache, prefill_cache, 20, 0, 0.0), Error);
  EXPECT_THROW(measure_paired_prefill(*model, cache, prefill_cache, 21, 1, 0.0), Error);  // past the prefill cache
}

TEST(BenchRun, Stories260KWithLookupReportsEveryFigure) {
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  BenchOptions o = tiny_options(model);
  o.engine.method = SpecMethod::Lookup;
  o.engine.spec.draft_max = 4;
  o.end_to_end = true;
  o.simulate_alpha = {0.6, 0.8};
  o.simulate_loop_tokens = 10;
  o.profile = true;
  const BenchReport r = run_bench(o);

  EXPECT_EQ(r.n_ctx, 128);
  EXPECT_EQ(r.n_threads, 2);
  expect_sane_curve(r.short_curve, 6, 16);
  expect_sane_curve(r.long_curve, 6, 128 - 6);  // 4096 capped by the model's context
  EXPECT_GT(r.weight_bytes, 0u);
  EXPECT_DOUBLE_EQ(r.decode_seconds, r.short_curve.seconds[0]);
  EXPECT_DOUBLE_EQ(r.decode_min_seconds, r.short_curve.min_seconds[0]);
  EXPECT_GT(r.decode_tps, 0.0);
  EXPECT_GT(r.decode_tps_long, 0.0);
  EXPECT_GT(r.achieved_gbs, 0.0);
  EXPECT_GT(r.bandwidth_gbs, 0.0);
  EXPECT_DOUBLE_EQ(r.bandwidth_ratio, r.achieved_gbs / r.bandwidth_gbs);
  EXPECT_GE(r.paired_count, 5);  // max(reps, 5) pairs of a probe pass and a decode repeat
  EXPECT_GT(r.paired_ratio, 0.0);
  EXPECT_GT(r.paired_decode_gbs, 0.0);
  EXPECT_GT(r.paired_probe_gbs, 0.0);
  EXPECT_LE(r.paired_probe_min_gbs, r.paired_probe_gbs);
  EXPECT_GE(r.paired_probe_max_gbs, r.paired_probe_gbs);
  EXPECT_EQ(r.paired_handoff_ns_each.size(), static_cast<size_t>(r.paired_count));
  EXPECT_EQ(r.short_curve.handoff_ns.size(), static_cast<size_t>(o.reps));  // one per repeat
  EXPECT_EQ(r.long_curve.handoff_ns.size(), static_cast<size_t>(o.reps));
  EXPECT_GT(r.handoff_ns_start, 0.0);
  EXPECT_GT(r.handoff_ns_end, 0.0);
  EXPECT_GE(r.prefill_paired_count, 5);  // max(reps, 5) pairs of a prefill chunk and a decode repeat
  EXPECT_GT(r.prefill_paired_ratio, 0.0);
  EXPECT_GT(r.prefill_paired_tps, 0.0);
  EXPECT_GT(r.prefill_paired_decode_tps, 0.0);
  // stories260K is all F32: 5 layers x (q, o 64x64; k, v 32x64; gate, up, down 172x64) plus the
  // 512x64 output matrix; the token embedding is a lookup.
  EXPECT_EQ(r.f32_macs_per_row, 5.0 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 172 * 64) + 512 * 64);
  EXPECT_EQ(r.int8_macs_per_row, 0.0);
  EXPECT_EQ(r.attention_macs_per_key, 2.0 * 5 * 8 * 8);  // 2 x layers x heads x head_dim
  const bool simd = active_isa() != Isa::Scalar;
  if (simd) {
    EXPECT_GT(r.compute_peak.int8_gmacs, 0.0);
    EXPECT_GT(r.compute_peak.f32_gmacs, 0.0);
    EXPECT_DOUBLE_EQ(r.row_floor_seconds, r.f32_macs_per_row / r.compute_peak.f32_gmacs / 1e9);
  } else {
    EXPECT_EQ(r.row_floor_seconds, 0.0);
  }
  EXPECT_EQ(r.prefill_chunk, 32);
  EXPECT_TRUE(r.prefill_splits_rows);  // 16 rows per thread of a tiny model: split by rows
  EXPECT_GT(r.prefill_tps, 0.0);
  ASSERT_EQ(r.profiles.size(), 2u);  // M = 1 and 5 (9 > m_max)
  EXPECT_EQ(r.profiles[1].first, 5);
  EXPECT_GE(r.prefill_profile.forwards, o.reps);
  EXPECT_GT(r.prefill_profile.ns[ForwardProfile::kNormGateUp], 0);
  EXPECT_GE(r.prefill_profile.other_ns(), 0);
  EXPECT_GT(r.fill_tps, 0.0);
  EXPECT_EQ(r.memory.mapped_file_bytes, file_bytes(model));
  EXPECT_GT(r.memory.kv_cache_bytes, 0u);
  EXPECT_GE(r.memory.peak_rss_bytes, r.memory.rss_bytes);
  EXPECT_GT(r.memory.rss_bytes, 0u);
  EXPECT_GT(r.memory.ratio(), 0.0);
  EXPECT_EQ(r.memory.draft_bytes, 0u);

  const EndToEndReport& e = r.end_to_end;
  EXPECT_EQ(e.drafter.empty(), false);
  EXPECT_EQ(e.n_prompts, 4);
  ASSERT_EQ(e.speedup_per_rep.size(), 1u);
  EXPECT_GT(e.plain_tokens, 0);
  EXPECT_EQ(e.plain_tokens, e.spec_tokens);  // greedy, same prompts: same lengths
  EXPECT_EQ(e.n_outputs_differ, 0);
  EXPECT_GT(e.spec_stats.n_target_passes, 0);
  EXPECT_LE(e.spec_stats.n_accepted, e.spec_stats.n_drafted);
  EXPECT_GE(e.spec_stats.mean_tokens_per_pass(), 1.0);

  ASSERT_EQ(r.simulations.size(), 2u);
  for (const Simulation& sim : r.simulations) {
    EXPECT_EQ(sim.c_draft_source.empty(), false);
    ASSERT_EQ(sim.points.size(), 5u);  // K up to m_max - 1
    for (const SimulatedPoint& p : sim.points) {
      EXPECT_GT(p.speedup_short, 0.0);
      EXPECT_GT(p.speedup_long, 0.0);
      EXPECT_GT(p.loop_speedup, 0.0);
    }
  }

  const std::string text = bench_report_text(r);
  for (const char* what : {"decode", "GB/s", "c(M)", "prefill", "peak RSS", "end to end", "acceptance",
                           "SIMULATION alpha 0.60", "SIMULATION alpha 0.80", "greedy outputs identical to plain: yes",
                           "profile: wall time per forward", "M = 5", "prefill 32",
                           "prefill (32-token chunk from position 0, rows split between the threads)"})
    EXPECT_NE(text.find(what), std::string::npos) << what << "\n" << text;
  EXPECT_NE(text.find(simd ? "roofline (the products alone, at peak)" : "compute peak: not measured"), std::string::npos) << text;

  const auto j = nlohmann::json::parse(bench_report_json(r));
  EXPECT_EQ(j["cost_curve"]["short"]["cost"].size(), 6u);
  EXPECT_EQ(j["cost_curve"]["short"]["cost"][0].get<double>(), 1.0);
  EXPECT_EQ(j["cost_curve"]["long"]["context"].get<int>(), 122);
  EXPECT_GT(j["decode"]["tokens_per_second"].get<double>(), 0.0);
  EXPECT_GT(j["decode"]["bandwidth_gbs"].get<double>(), 0.0);
  EXPECT_EQ(j["decode"]["bandwidth_paired"]["pairs"].get<int>(), r.paired_count);
  EXPECT_EQ(j["prefill"]["paired"]["pairs"].get<int>(), r.prefill_paired_count);
  EXPECT_TRUE(j["prefill"]["splits_rows"].get<bool>());
  EXPECT_DOUBLE_EQ(j["prefill"]["paired"]["over_decode"].get<double>(), r.prefill_paired_ratio);
  EXPECT_GT(j["memory"]["peak_rss_bytes"].get<double>(), 0.0);
  EXPECT_EQ(j.contains("compute_roofline"), simd);
  if (simd) {
    EXPECT_EQ(j["compute_roofline"]["f32_macs_per_row"].get<double>(), r.f32_macs_per_row);
  }
  EXPECT_EQ(j["end_to_end"]["outputs_differ"].get<int>(), 0);
  EXPECT_EQ(j["profile"].size(), 2u);
  EXPECT_EQ(j["prefill_profile"]["rows"].get<int>(), 32);
  EXPECT_EQ(j["prefill_profile"]["forwards"].get<int64_t>(), r.prefill_profile.forwards);
  ASSERT_EQ(j["simulation"].size(), 2u);
  EXPECT_EQ(j["simulation"][0]["label"].get<std::string>(), "SIMULATION");
  EXPECT_EQ(j["simulation"][1]["points"].size(), 5u);

  const std::string svg = bench_report_svg(r);
  EXPECT_EQ(check_xml(svg), "") << svg;
  EXPECT_EQ(svg.rfind("<svg", svg.find("<svg")), svg.find("<svg"));
  // Two cost curves, then per alpha: short-context, long-context and loop speedups.
  EXPECT_EQ(count(svg, "class=\"curve\""), 2u + 2u * 3u);
  EXPECT_NE(svg.find("SIMULATION"), std::string::npos);
}

TEST(BenchRun, NoisyCopyDraftMeasuresCDraftAndStaysLossless) {
  testing::TinyModelSpec spec;
  spec.weight_scale = 3.0f;
  const std::string target = testing::make_random_llama("bench-target.gguf", spec);
  const std::string draft = testing::temp_dir() + "/bench-draft.gguf";
  make_noisy_copy(target, draft, 0.05f, 11);
  BenchOptions o = tiny_options(target);
  o.engine.draft_path = draft;
  o.engine.spec.draft_max = 3;
  o.engine.spec.adaptive = false;  // a same-size draft costs ~1: adaptive K would not draft
  o.end_to_end = true;
  o.prompts = {"the cat", "a b c"};
  o.bandwidth_bytes = 0;  // skipped
  o.simulate_alpha = {0.7};
  o.long_ctx = 0;  // the curves need 16 + 6 positions; the 32-token prefill chunk still gets 32
  const BenchReport r = run_bench(o);
  EXPECT_EQ(r.prefill_chunk, 32);
  EXPECT_TRUE(r.long_curve.seconds.empty());
  EXPECT_GT(r.draft_decode_seconds, 0.0);
  EXPECT_DOUBLE_EQ(r.c_draft_forward, r.draft_decode_seconds / r.decode_seconds);
  EXPECT_EQ(r.memory.draft_bytes > file_bytes(draft), true);
  EXPECT_EQ(r.bandwidth_gbs, 0.0);
  EXPECT_EQ(r.end_to_end.drafter.empty(), false);
  EXPECT_EQ(r.end_to_end.n_prompts, 2);
  EXPECT_EQ(r.end_to_end.n_outputs_differ, 0);
  EXPECT_GT(r.end_to_end.spec_stats.n_drafted, 0);
  ASSERT_EQ(r.simulations.size(), 1u);
  EXPECT_EQ(r.simulations[0].c_draft_source, "draft model forward");
  EXPECT_DOUBLE_EQ(r.simulations[0].c_draft, r.c_draft_forward);
  EXPECT_EQ(r.simulations[0].points[0].loop_speedup, 0.0);  // loop not requested
  const std::string text = bench_report_text(r);
  EXPECT_NE(text.find("draft model: 1-row forward"), std::string::npos) << text;
  EXPECT_NE(text.find("probe skipped"), std::string::npos) << text;
  EXPECT_EQ(check_xml(bench_report_svg(r)), "");
}

TEST(BenchRun, RejectsBadOptionsNamingThem) {
  testing::TinyModelSpec spec;
  const std::string path = testing::make_random_llama("bench-bad.gguf", spec);
  auto expect_error = [](const BenchOptions& o, const std::string& needle) {
    try {
      run_bench(o);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  BenchOptions o = tiny_options(path);
  o.reps = 0;
  expect_error(o, "--reps 0");
  o = tiny_options(path);
  o.simulate_alpha = {1.5};
  expect_error(o, "--simulate-alpha 1.5");
  o = tiny_options("");
  expect_error(o, "no model");
  o = tiny_options(path);
  o.short_ctx = 200;  // the model's context is 128
  expect_error(o, "context of 128");
}

// A report with the roofline's inputs: peaks of 400 (8-bit) and 100 (f32) GMAC/s, 1 G 8-bit
// multiply-adds per row (2.5 ms at peak), a 25 ms decode and a 2-row curve of 25 and 30 ms.
BenchReport roofline_report() {
  BenchReport r;
  r.compute_peak = {400.0, 100.0, "vpdpbusd zmm", "vfmadd231ps zmm"};
  r.int8_macs_per_row = 1e9;
  r.row_floor_seconds = 1e9 / 400e9;  // 2.5 ms
  r.decode_seconds = 0.025;
  r.short_curve.seconds = r.short_curve.min_seconds = {0.025, 0.03};
  r.short_curve.cost = r.short_curve.min_cost = r.short_curve.paired_cost = {1.0, 1.2};
  return r;
}

// The roofline lines: shares of the peak from the curve and prefill, and a warning when a share
// exceeds 100% (the probe was slowed; a figure nobody should quote).
TEST(BenchReportText, ComputeShareAbove100PercentIsFlagged) {
  BenchReport r = roofline_report();  // 2 rows: 5 ms of products in 30 ms = 17%
  r.prefill_tps = 200;  // 200 x 2.5 ms = 50%
  std::string text = bench_report_text(r);
  EXPECT_NE(text.find("ran at 17% of peak; prefill at 50%"), std::string::npos) << text;
  EXPECT_EQ(text.find("WARNING: a share above 100%"), std::string::npos) << text;
  r.prefill_tps = 500;  // 125%
  text = bench_report_text(r);
  EXPECT_NE(text.find("prefill at 125%"), std::string::npos) << text;
  EXPECT_NE(text.find("WARNING: a share above 100%"), std::string::npos) << text;
  r.isa = "avx512+amx";  // AMX tiles can beat the VNNI probe: a note, not a warning
  text = bench_report_text(r);
  EXPECT_EQ(text.find("WARNING: a share above 100%"), std::string::npos) << text;
  EXPECT_NE(text.find("AMX on: prefill-sized products run on AMX tiles"), std::string::npos) << text;
}

// The roofline for a decode at the probe's bandwidth: 1 GB of weights at 50 GB/s is a 20 ms
// decode, against which 2.5 ms of products per row bound c(M) >= 0.125 M and prefill <= 8x;
// without a probe the line is left out.
TEST(BenchReportText, RooflineAtTheProbesBandwidth) {
  BenchReport r = roofline_report();
  r.weight_bytes = 1000000000;  // read in the 25 ms decode: 40 GB/s
  std::string text = bench_report_text(r);
  EXPECT_EQ(text.find("at the probe's bandwidth"), std::string::npos) << text;
  EXPECT_FALSE(nlohmann::json::parse(bench_report_json(r))["compute_roofline"].contains("decode_seconds_at_probe"));
  r.bandwidth_gbs = 50.0;
  text = bench_report_text(r);
  EXPECT_NE(text.find("roofline (the products alone, at peak): c(M) >= max(1, 0.100 M); prefill <= 400 tok/s = 10.0x decode"),
            std::string::npos) << text;
  EXPECT_NE(text.find("with a decode at the probe's bandwidth (20.000 ms): c(M) >= max(1, 0.125 M); prefill <= 8.0x decode"),
            std::string::npos) << text;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(bench_report_json(r))["compute_roofline"]["decode_seconds_at_probe"].get<double>(), 0.02);
}

// The long context's floor adds each row's attention products at the f32 peak: 65536 per
// visible key at context 4000 is 262.2 M for the first row (4001 keys), 2.622 ms at 100 GMAC/s,
// plus the 2.5 ms of weights: 5.122 ms against a 50 ms t(1), c(M) >= 0.102 M; the 2 rows see
// 8003 keys, 10.245 ms of products in 100 ms = 10%. Without a long curve, no line.
TEST(BenchReportText, LongContextRooflineAddsAttention) {
  BenchReport r = roofline_report();
  r.attention_macs_per_key = 65536;
  std::string text = bench_report_text(r);
  EXPECT_EQ(text.find("attention's"), std::string::npos) << text;
  EXPECT_FALSE(nlohmann::json::parse(bench_report_json(r))["compute_roofline"].contains("attention_macs_per_key"));
  r.long_curve.context = 4000;
  r.long_curve.seconds = r.long_curve.min_seconds = {0.05, 0.1};
  r.long_curve.cost = r.long_curve.min_cost = r.long_curve.paired_cost = {1.0, 2.0};
  text = bench_report_text(r);
  EXPECT_NE(text.find("at context 4000: attention's 65536 f32 multiply-adds per visible key make a row's products "
                      "5.1221 ms at peak; c(M) >= max(1, 0.102 M) there"),
            std::string::npos) << text;
  EXPECT_NE(text.find("measured: t(2) = 100.000 ms at context 4000 -> the products of its 2 rows (weights and attention) "
                      "ran at 10% of peak"),
            std::string::npos) << text;
  const auto j = nlohmann::json::parse(bench_report_json(r))["compute_roofline"];
  EXPECT_EQ(j["attention_macs_per_key"].get<double>(), 65536.0);
  EXPECT_NEAR(j["long_rows_floor_seconds"].get<double>(), 5e-3 + 65536.0 * 8003 / 100e9, 1e-12);
}

// Calls that the thread pool's stall back-off ran on one thread make a warning (the figures
// are partly single-threaded); without any, nothing.
TEST(BenchReportText, ThreadPoolBackOffIsFlagged) {
  BenchReport r;
  r.short_curve.seconds = r.short_curve.min_seconds = {0.025, 0.03};
  r.short_curve.cost = r.short_curve.min_cost = r.short_curve.paired_cost = {1.0, 1.2};
  std::string text = bench_report_text(r);
  EXPECT_EQ(text.find("thread pool"), std::string::npos) << text;
  r.pool_stalls = 3;
  r.pool_inline_calls = 1200;
  text = bench_report_text(r);
  EXPECT_NE(text.find("WARNING: after 3 stalls"), std::string::npos) << text;
  EXPECT_NE(text.find("the thread pool ran 1200 parallel calls on the calling thread alone"), std::string::npos) << text;
  EXPECT_EQ(nlohmann::json::parse(bench_report_json(r))["run"]["pool_inline_calls"], 1200);
}

// Paired probe passes far apart (the memory's speed moved during the run) get a note naming
// their range; passes within kProbeSpreadNote of each other do not. The JSON keeps the range.
TEST(BenchReportText, ProbeSpreadIsNoted) {
  BenchReport r = roofline_report();
  r.paired_count = 5;
  r.paired_ratio = 0.9;
  r.paired_decode_gbs = 36.0;
  r.paired_probe_gbs = 40.0;
  r.paired_probe_min_gbs = 38.0;
  r.paired_probe_max_gbs = 38.0 * kProbeSpreadNote;  // not above the threshold
  std::string text = bench_report_text(r);
  EXPECT_EQ(text.find("the memory's speed moved"), std::string::npos) << text;
  r.paired_probe_max_gbs = 61.0;
  text = bench_report_text(r);
  EXPECT_NE(text.find("NOTE: the probe passes read 38.00-61.00 GB/s: the memory's speed moved"), std::string::npos) << text;
  const auto j = nlohmann::json::parse(bench_report_json(r))["decode"]["bandwidth_paired"];
  EXPECT_DOUBLE_EQ(j["probe_min_gbs"].get<double>(), 38.0);
  EXPECT_DOUBLE_EQ(j["probe_max_gbs"].get<double>(), 61.0);
}

TEST(BenchReportText, CurvesOfUnequalLengthAreAnErrorNamingTheLengths) {
  BenchReport r;
  r.short_curve.seconds = r.short_curve.min_seconds = {0.025, 0.03};
  r.short_curve.cost = r.short_curve.paired_cost = {1.0, 1.2};
  r.short_curve.min_cost = {1.0};  // one entry short
  for (auto report : {bench_report_text, bench_report_json}) {
    try {
      report(r);
      ADD_FAILURE() << "no error for a curve with a short min_cost";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("short-context cost curve's vectors differ in length (seconds 2, cost 2, "
                                           "min_seconds 2, min_cost 1, paired_cost 2)"),
                std::string::npos)
          << e.what();
    }
  }
  r.short_curve.min_cost = {1.0, 1.1};
  EXPECT_NO_THROW(bench_report_text(r));
}

}  // namespace
}  // namespace specdec
