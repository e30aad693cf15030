// `specdec bench` as a user runs it: report on stdout, --json and --plot files, errors.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/cli_run.h"
#include "common/testing.h"

namespace specdec {
namespace {

using testing::run_cli;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(CliBench, Stories260KWritesReportJsonAndPlot) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  const std::string json = testing::temp_dir() + "/bench.json";
  const std::string svg = testing::temp_dir() + "/bench.svg";
  auto r = run_cli("bench -m '" + model + "' --spec ngram -t 2 --reps 1 --min-rep-ms 0 --bw-mib 2 --bw-passes 1 --m-max 5 " +
                   "-n 8 --simulate-alpha 0.6 --simulate-alpha 0.8 --json '" + json + "' --plot '" + svg + "' -q");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  for (const char* what : {"decode", "measured read bandwidth", "c(M)", "prefill", "peak RSS", "drafter ngram",
                           "SIMULATION (predicted, not measured decoding)", "SIMULATION alpha 0.80"})
    EXPECT_NE(r.out.find(what), std::string::npos) << what << "\n" << r.out;
  EXPECT_EQ(r.err, "") << "-q prints no progress";
  const auto j = nlohmann::json::parse(read_all(json));
  EXPECT_EQ(j["run"]["threads"].get<int>(), 2);
  EXPECT_EQ(j["cost_curve"]["short"]["cost"].size(), 5u);
  EXPECT_EQ(j["end_to_end"]["drafter"].get<std::string>().empty(), false);
  EXPECT_EQ(j["simulation"].size(), 2u);
  const std::string plot = read_all(svg);
  EXPECT_EQ(plot.find("<?xml"), 0u);
  EXPECT_NE(plot.find("</svg>"), std::string::npos);
  EXPECT_NE(plot.find("Verify cost c(M)"), std::string::npos);
}

TEST(CliBench, WithoutADrafterSkipsTheEndToEndPart) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  auto r = run_cli("bench -m '" + model + "' --reps 1 --min-rep-ms 0 --bw-mib 0 --m-max 3 --ctx-long 0");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(r.out.find("end to end"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("SIMULATION"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("probe skipped"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("long context not measured"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("bench: c(M)"), std::string::npos) << "progress goes to stderr: " << r.err;
}

TEST(CliBench, PromptsFileTakesJsonStringLinesForMultiLinePrompts) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  const std::string prompts = testing::temp_dir() + "/prompts.txt";
  const std::string json = testing::temp_dir() + "/prompts-bench.json";
  {
    std::ofstream out(prompts);
    out << "Once upon a time\n\n\"Lily had a ball.\\nShe\"\n";
  }
  auto r = run_cli("bench -m '" + model + "' --spec lookup --reps 1 --min-rep-ms 0 --bw-mib 0 --m-max 2 --ctx-long 0 " +
                   "-n 4 -q --prompts '" + prompts + "' --json '" + json + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(nlohmann::json::parse(read_all(json))["end_to_end"]["prompts"].get<int>(), 2);
  {
    std::ofstream out(prompts);
    out << "plain line\n\"unterminated\n";
  }
  r = run_cli("bench -m '" + model + "' --spec lookup --reps 1 --bw-mib 0 --prompts '" + prompts + "'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("line 2"), std::string::npos) << r.err;
}

TEST(CliBench, BadArgumentsFailWithAMessage) {
  SPECDEC_REQUIRE_CLI();
  auto r = run_cli("bench -m /nonexistent/model.gguf --reps 1 --bw-mib 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("/nonexistent/model.gguf"), std::string::npos) << r.err;
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  r = run_cli("bench -m '" + model + "' --simulate-alpha 1.5");
  EXPECT_NE(r.exit_code, 0);
}

}  // namespace
}  // namespace specdec
