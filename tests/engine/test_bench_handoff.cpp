// How `specdec bench` reports the threads' hand-off latency (bench.h, handoff_latency.h): a line
// with the figures before and after the measurements, the pairs' range on the paired line, the
// paired ratios split by near and far hand-offs when a run saw both, each cost curve's range,
// and a note when the hand-off moved by more than kHandoffSpreadNote; all of it in the JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "specdec/bench.h"

namespace specdec {
namespace {

// A report with one short curve and five paired probe passes (3 near, 2 far hand-offs).
BenchReport paired_report() {
  BenchReport r;
  r.n_threads = 2;
  r.short_curve.seconds = r.short_curve.min_seconds = {0.025, 0.03};
  r.short_curve.cost = r.short_curve.min_cost = r.short_curve.paired_cost = {1.0, 1.2};
  r.bandwidth_gbs = 60.0;
  r.paired_count = 5;
  r.paired_ratio = 0.9;
  r.paired_decode_gbs = 32.0;
  r.paired_probe_gbs = 35.0;
  r.paired_probe_min_gbs = 34.0;
  r.paired_probe_max_gbs = 40.0;
  r.handoff_ns_start = r.handoff_ns_end = 31.0;
  r.paired_decode_gbs_each = {33.0, 32.0, 31.0, 48.0, 50.0};
  r.paired_probe_gbs_each = {35.0, 35.0, 34.0, 60.0, 62.5};
  r.paired_handoff_ns_each = {30.0, 32.0, 31.0, 150.0, 160.0};
  return r;
}

TEST(BenchReportHandoff, RangesSplitAndNoteWhenTheThreadsMoved) {
  const BenchReport r = paired_report();
  const std::string text = bench_report_text(r);
  EXPECT_NE(text.find("thread hand-off (a write reaching the slowest worker, one way): 31 ns before the measurements, 31 ns after"),
            std::string::npos) << text;
  EXPECT_NE(text.find("(decode 32.00 GB/s, probe 35.00 GB/s); hand-offs 30-160 ns"), std::string::npos) << text;
  // near: ratios 33/35, 32/35, 31/34 (median 32/35 = 0.914), probes 35, 35, 34; far: 48/60 and
  // 50/62.5, both 0.800, probes 60 and 62.5 (median 61.25).
  EXPECT_NE(text.find("paired by hand-off: near (<= 75 ns) median ratio 0.914 over 3 pairs (probe 35.00 GB/s); "
                      "far median ratio 0.800 over 2 pairs (probe 61.25 GB/s)"),
            std::string::npos) << text;
  EXPECT_NE(text.find("NOTE: the thread hand-off moved between 30 and 160 ns during this run"), std::string::npos) << text;
  const auto j = nlohmann::json::parse(bench_report_json(r));
  EXPECT_DOUBLE_EQ(j["run"]["handoff_ns_start"].get<double>(), 31.0);
  EXPECT_DOUBLE_EQ(j["run"]["handoff_ns_end"].get<double>(), 31.0);
  EXPECT_DOUBLE_EQ(j["decode"]["bandwidth_paired"]["handoff_min_ns"].get<double>(), 30.0);
  EXPECT_DOUBLE_EQ(j["decode"]["bandwidth_paired"]["handoff_max_ns"].get<double>(), 160.0);
  EXPECT_EQ(j["decode"]["bandwidth_paired"]["handoff_ns_each"].size(), 5u);
  EXPECT_DOUBLE_EQ(j["decode"]["bandwidth_paired"]["probe_gbs_each"][4].get<double>(), 62.5);
}

TEST(BenchReportHandoff, SteadyHandoffsGiveNoSplitAndNoNote) {
  BenchReport r = paired_report();
  r.paired_handoff_ns_each = {30.0, 32.0, 31.0, 35.0, 30.0 * kHandoffSpreadNote};  // within the spread
  std::string text = bench_report_text(r);
  EXPECT_EQ(text.find("paired by hand-off"), std::string::npos) << text;
  EXPECT_EQ(text.find("hand-off moved"), std::string::npos) << text;
  // The start and end figures count too: threads that moved before the pairs.
  r.handoff_ns_end = 150.0;
  text = bench_report_text(r);
  EXPECT_NE(text.find("NOTE: the thread hand-off moved between 30 and 150 ns"), std::string::npos) << text;
  // A cost curve whose repeats saw both placements says so under its table, and its hand-offs
  // count for the run's note.
  r.handoff_ns_end = 31.0;
  r.short_curve.context = 16;
  r.short_curve.handoff_ns = {31.0, 31.0, 148.0};
  text = bench_report_text(r);
  EXPECT_NE(text.find("context 16: thread hand-offs 31-148 ns before the repeats (the threads changed cache domains during this curve"),
            std::string::npos) << text;
  EXPECT_NE(text.find("NOTE: the thread hand-off moved between 30 and 148 ns"), std::string::npos) << text;
  EXPECT_EQ(nlohmann::json::parse(bench_report_json(r))["cost_curve"]["short"]["handoff_ns"].size(), 3u);
  // One thread: no hand-off line at all.
  BenchReport single = paired_report();
  single.handoff_ns_start = single.handoff_ns_end = 0;
  single.paired_handoff_ns_each = {0, 0, 0, 0, 0};
  text = bench_report_text(single);
  EXPECT_EQ(text.find("hand-off"), std::string::npos) << text;
}

}  // namespace
}  // namespace specdec
