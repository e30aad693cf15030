// `specdec bench --simulate-tree PROFILE` (issue 9): the chain-vs-tree SIMULATION table in the
// report and the JSON, and a malformed profile rejected with its text named.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/cli_run.h"
#include "common/testing.h"

namespace specdec {
namespace {

using testing::run_cli;

TEST(CliBenchTree, SimulateTreePrintsChainAndTreeAtEachBudget) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  const std::string json = testing::temp_dir() + "/bench-tree.json";
  auto r = run_cli("bench -m '" + model + "' -t 2 --reps 1 --min-rep-ms 0 --bw-mib 0 --m-max 9 --ctx-long 0 " +
                   "--simulate-tree 0.6,0.2,0.1 --simulate-tree 0.8 --simulate-tree-nodes 4 --simulate-tree-nodes 8 " +
                   "--json '" + json + "' -q");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  for (const char* what : {"SIMULATION, token trees (predicted, not measured decoding)",
                           "SIMULATION profile 0.600 0.200 0.100", "SIMULATION profile 0.800", "tree tok/s"})
    EXPECT_NE(r.out.find(what), std::string::npos) << what << "\n" << r.out;
  std::ifstream in(json);
  std::stringstream ss;
  ss << in.rdbuf();
  const auto j = nlohmann::json::parse(ss.str());
  ASSERT_EQ(j["tree_simulation"].size(), 2u);
  ASSERT_EQ(j["tree_simulation"][0]["points"].size(), 2u);
  EXPECT_EQ(j["tree_simulation"][0]["points"][1]["nodes"].get<int>(), 8);
  EXPECT_GT(j["tree_simulation"][0]["points"][1]["tree_tokens"].get<double>(),
            j["tree_simulation"][0]["points"][1]["chain_tokens"].get<double>());
}

TEST(CliBenchTree, BadProfilesAreNamed) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  auto r = run_cli("bench -m '" + model + "' --reps 1 --bw-mib 0 --simulate-tree 0.6,x");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("'x' is not a number"), std::string::npos) << r.err;
  r = run_cli("bench -m '" + model + "' --reps 1 --bw-mib 0 --simulate-tree 0.7,0.5");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("above 1"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace specdec
