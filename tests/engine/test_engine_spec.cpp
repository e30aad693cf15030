// The engine's speculative options (issues 3 and 9): --spec tree with and without a draft model
// (greedy output identical to plain), the origins streamed for --show-drafts, the measured
// costs in the stats with a fixed K, and the CLI printing them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/cli_run.h"
#include "common/testing.h"
#include "engine/engine_requests.h"
#include "specdec/engine.h"
#include "specdec/error.h"

namespace specdec {
namespace {

using testing::greedy;
using testing::kRepetitive;
using testing::options_for;

using testing::run_cli;

TEST(EngineSpec, TreeMethodGreedyEqualsPlainWithAndWithoutADraftModel) {
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  for (bool with_draft : {false, true}) {
    EngineOptions o = options_for(model, "tree", 1);
    if (with_draft) o.draft_path = model;  // the model as its own draft
    o.spec.adaptive = false;
    o.tree_nodes = 8;
    o.tree_width = 2;
    o.tree_depth = 4;
    Engine engine(o);
    EXPECT_EQ(engine.method(), SpecMethod::Tree);
    for (const char* prompt : {"Once upon a time", kRepetitive, "The cat"}) {
      GenerateRequest request = greedy(prompt, 50);
      request.speculative = false;
      const auto plain = engine.generate(request);
      request.speculative = true;
      const auto spec = engine.generate(request);
      EXPECT_EQ(spec.tokens, plain.tokens) << (with_draft ? "draft tree / " : "lookup tree / ") << prompt;
      EXPECT_EQ(spec.drafter_name, with_draft ? "draft-model-tree" : "lookup-tree");
      if (with_draft) {
        EXPECT_GT(spec.stats.n_tree_steps, 0);
        EXPECT_GT(spec.stats.acceptance_rate(), 0.0);
      }
    }
  }
  // --tree-nodes with the n-gram drafter also drafts trees.
  EngineOptions o = options_for(model, "ngram", 1);
  o.tree_nodes = 10;
  o.tree_width = 3;
  o.spec.adaptive = false;
  Engine engine(o);
  GenerateRequest request = greedy(kRepetitive, 40);
  request.speculative = false;
  const auto plain = engine.generate(request);
  request.speculative = true;
  const auto spec = engine.generate(request);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_GT(spec.stats.n_tree_steps, 0);
}

TEST(EngineSpec, TreeOptionsAreChecked) {
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  EngineOptions o = options_for(model, "tree", 1);
  o.tree_width = -1;  // 0 means the drafters' defaults
  EXPECT_THROW(Engine{o}, Error);
  o.tree_width = 0;
  o.tree_depth = -1;  // 0 means as deep as the node budget
  EXPECT_THROW(Engine{o}, Error);
  o.tree_depth = 0;
  EXPECT_NO_THROW(Engine{o});
  o.tree_rank_temperature = -0.5f;  // 0 means the drafter's default
  EXPECT_THROW(Engine{o}, Error);
  EXPECT_THROW(parse_spec_method("trees"), Error);
  EXPECT_EQ(parse_spec_method("tree"), SpecMethod::Tree);
  EXPECT_STREQ(spec_method_name(SpecMethod::Tree), "tree");
}

TEST(EngineSpec, StreamedOriginsSayWhereEachTokenCameFrom) {
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  // A model drafting for itself: every draft token is accepted, each step ends with a bonus.
  EngineOptions self = options_for(model, "draft", 1);
  self.draft_path = model;
  self.spec.adaptive = false;
  self.spec.draft_max = 4;
  Engine engine(self);
  std::vector<TokenOrigin> origins;
  std::string streamed;
  auto on_piece = [&](const StreamPiece& piece) {
    origins.push_back(piece.origin);
    streamed += piece.text;
    return true;
  };
  auto result = engine.generate(greedy("Once upon a time", 40), on_piece);
  EXPECT_EQ(streamed, result.text);
  auto count = [&](TokenOrigin o) { return std::count(origins.begin(), origins.end(), o); };
  EXPECT_GT(count(TokenOrigin::AcceptedDraft), 0);
  EXPECT_GT(count(TokenOrigin::Bonus), 0);
  EXPECT_EQ(count(TokenOrigin::Corrected), 0) << "a self-draft is never corrected";
  // Prompt lookup on text that does not repeat the prompt exactly: some drafts are corrected.
  EngineOptions lookup = options_for(model, "lookup", 1);
  lookup.spec.adaptive = false;
  Engine lookup_engine(lookup);
  origins.clear();
  streamed.clear();
  result = lookup_engine.generate(greedy(kRepetitive, 60), on_piece);
  EXPECT_EQ(streamed, result.text);
  EXPECT_GT(count(TokenOrigin::Corrected), 0);
  // Plain decoding streams plain pieces only.
  origins.clear();
  GenerateRequest plain = greedy("Once upon a time", 20);
  plain.speculative = false;
  engine.generate(plain, on_piece);
  EXPECT_EQ(count(TokenOrigin::Plain), static_cast<long>(origins.size()));
}

TEST(EngineSpec, FixedKStatsCarryMeasuredCosts) {
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  EngineOptions o = options_for(model, "draft", 1);
  o.draft_path = model;
  o.spec.adaptive = false;
  o.spec.draft_max = 3;
  Engine engine(o);
  const auto result = engine.generate(greedy("Once upon a time", 40));
  const SpecStats& s = result.stats;
  EXPECT_EQ(s.n_target_passes, s.n_drafting_steps) << "fixed K: every step drafts";
  EXPECT_GT(s.target_row_seconds, 0.0) << "the 1-row forward must be measured (probe)";
  EXPECT_GT(s.c_draft, 0.0);
  EXPECT_GT(s.verify_cost, 0.0);
  ASSERT_EQ(s.acceptance_by_position().size(), 3u);
  EXPECT_EQ(s.acceptance_by_position()[0], 1.0);
}

TEST(EngineSpec, CliPrintsMeasuredCostsAndTrees) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  auto r = run_cli("generate -m '" + model + "' -md '" + model +
                   "' -p 'Once upon a time' -n 30 --temp 0 --no-adaptive --draft-max 3 -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t at = r.err.find("c_draft ");
  ASSERT_NE(at, std::string::npos) << r.err;
  EXPECT_GT(std::atof(r.err.c_str() + at + 8), 0.0) << "c_draft must be measured with a fixed K:\n" << r.err;
  const size_t vc = r.err.find("verify_cost ");
  ASSERT_NE(vc, std::string::npos) << r.err;
  EXPECT_GT(std::atof(r.err.c_str() + vc + 12), 0.0) << r.err;
  EXPECT_NE(r.err.find("acceptance by draft position: 1:1.00 2:1.00 3:1.00"), std::string::npos) << r.err;
  auto t = run_cli("generate -m '" + model + "' -p 'Lily saw a ball. Lily saw a ball. Lily' -n 30 --temp 0 --spec tree "
                   "--tree-nodes 8 --tree-width 2 --tree-depth 4 --compare-plain -t 1");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.err.find("outputs identical"), std::string::npos) << t.err;
  EXPECT_NE(t.err.find("tree"), std::string::npos) << t.err;
}

// --kv-type f16: speculative output equals plain decoding with the same cache type, and the
// bench reports the cache's type and its halved size; a bad value is a clear error.
TEST(EngineSpec, CliF16KvCache) {
  SPECDEC_REQUIRE_CLI();
  SPECDEC_FIXTURE(model, "models/stories260K.gguf");
  auto r = run_cli("generate -m '" + model + "' -md '" + model +
                   "' -p 'Once upon a time' -n 30 --temp 0 --kv-type f16 --compare-plain -t 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("outputs identical"), std::string::npos) << r.err;
  auto bad = run_cli("generate -m '" + model + "' -p 'Once' -n 3 --kv-type q8");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--kv-type 'q8' must be f32 or f16"), std::string::npos) << bad.err;
  auto bench = run_cli("bench -m '" + model + "' --kv-type f16 -n 8 --reps 1 --bw-mib 0 --ctx-long 0 --m-max 2 -t 1 -c 256");
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  const std::string text = bench.out + bench.err;
  EXPECT_NE(text.find("MiB (F16)"), std::string::npos) << text;
}

}  // namespace
}  // namespace specdec
