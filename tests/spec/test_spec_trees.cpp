// Token trees (issue 9) outside the chi-square suite: the n-gram and prompt-lookup drafters'
// trees (children = the top continuations), greedy tree output identical to plain decoding on
// many prompts and shapes with the real drafters, per-step tree statistics, the draft model's
// re-ranked trees, and KV compaction after a deep non-first branch.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common/testing.h"
#include "spec/spec_models.h"
#include "specdec/acceptance.h"
#include "specdec/draft_model.h"
#include "specdec/error.h"
#include "specdec/ngram.h"
#include "specdec/prompt_lookup.h"
#include "specdec/rng.h"
#include "specdec/speculative.h"

namespace specdec {
namespace {

using testing::generate;
using testing::greedy_params;

using testing::kGreedy;

std::vector<Token> children_of(const Draft& d, int32_t node) {
  std::vector<Token> out;
  for (int i = 0; i < d.size(); ++i) {
    if (d.parent[static_cast<size_t>(i)] == node) out.push_back(d.tokens[static_cast<size_t>(i)]);
  }
  return out;
}

// --- the model-free drafters' trees -----------------------------------------------------------

TEST(NgramTree, ChildrenAreTheTopContinuationsBestFirst) {
  // Order 2 only: after 3 came 11 twice and 10 once; after 11 came 6 and 1 (1 more recently).
  const std::vector<Token> prompt{1, 2, 3, 10, 5, 2, 3, 11, 6, 2, 3, 11, 1, 2, 3};
  NgramConfig c;
  c.min_order = c.max_order = 2;
  c.tree_width = 2;
  NgramDrafter drafter(c);
  const Draft d = drafter.propose(prompt, 4, kGreedy);
  EXPECT_NO_THROW(validate_draft(d));
  EXPECT_EQ(d.rule, ChildRule::Deterministic);
  EXPECT_TRUE(d.q.empty());
  ASSERT_EQ(d.size(), 4);
  EXPECT_EQ(children_of(d, -1), (std::vector<Token>{11, 10}));  // 2/3 before 1/3
  EXPECT_EQ(d.tokens[0], 11);
  EXPECT_EQ(children_of(d, 0), (std::vector<Token>{1, 6}));  // both 1/3 of the path; recent first
  EXPECT_EQ(drafter.last_confidence().size(), 4u);
  // The node budget bounds the tree, the depth limit too.
  for (int n_max : {1, 2, 3, 7, 12}) EXPECT_LE(drafter.propose(prompt, n_max, kGreedy).size(), n_max);
  c.tree_depth = 1;
  NgramDrafter shallow(c);
  const Draft s = shallow.propose(prompt, 8, kGreedy);
  EXPECT_EQ(s.tokens, (std::vector<Token>{11, 10}));
  EXPECT_EQ(s.parent, (std::vector<int32_t>{-1, -1}));
  c.tree_width = 0;
  EXPECT_THROW(NgramDrafter{c}, Error);
}

TEST(NgramTree, BestPathFollowsTheChainPrediction) {
  // The tree starts with the chain's prediction and branches where the text did: 6 -> 7 | 8.
  const std::vector<Token> prompt{4, 5, 6, 7, 4, 5, 6, 8, 4, 5, 6, 7, 4, 5};
  NgramDrafter chain;
  NgramConfig c;
  c.tree_width = 3;
  NgramDrafter tree(c);
  const Draft a = chain.propose(prompt, 9, kGreedy);
  const Draft b = tree.propose(prompt, 9, kGreedy);
  ASSERT_EQ(b.size(), 9);
  EXPECT_NO_THROW(validate_draft(b));
  EXPECT_EQ(b.tokens[0], a.tokens[0]);
  EXPECT_EQ(b.tokens[1], a.tokens[1]);
  EXPECT_EQ(b.parent[1], 0);
  EXPECT_FALSE(b.is_chain());
  EXPECT_EQ(children_of(b, 0), (std::vector<Token>{7, 8}));
}

TEST(LookupTree, BranchesFromSeveralOccurrencesMergedIntoATrie) {
  // (5 6 7) occurred twice before the suffix: followed by 30 31 32 (recent) and 20 21 22.
  const std::vector<Token> prompt{5, 6, 7, 20, 21, 22, 9, 5, 6, 7, 30, 31, 32, 9, 5, 6, 7};
  PromptLookupConfig c{2, 3};
  c.tree_width = 2;
  c.tree_depth = 3;
  PromptLookupDrafter drafter(c);
  drafter.begin(prompt);
  const std::vector<LookupMatch> matches = drafter.find_all(3);
  ASSERT_GE(matches.size(), 2u);
  EXPECT_EQ(matches[0].end, 9);
  EXPECT_EQ(matches[1].end, 2);
  EXPECT_EQ(matches[0].end, drafter.find().end);
  const Draft d = drafter.propose(prompt, 6, kGreedy);
  EXPECT_EQ(d.tokens, (std::vector<Token>{30, 31, 32, 20, 21, 22}));
  EXPECT_EQ(d.parent, (std::vector<int32_t>{-1, 0, 1, -1, 3, 4}));
  // Budget 4: the second branch is cut.
  EXPECT_EQ(drafter.propose(prompt, 4, kGreedy).tokens, (std::vector<Token>{30, 31, 32, 20}));
  // Shared prefixes are merged: both occurrences continue with 30.
  const std::vector<Token> shared{5, 6, 7, 30, 40, 9, 5, 6, 7, 30, 41, 9, 5, 6, 7};
  const Draft t = drafter.propose(shared, 6, kGreedy);
  EXPECT_EQ(t.tokens, (std::vector<Token>{30, 41, 9, 40, 9}));
  EXPECT_EQ(t.parent, (std::vector<int32_t>{-1, 0, 1, 0, 3}));
  // The first branch is the chain proposal.
  PromptLookupDrafter chain(PromptLookupConfig{2, 3});
  EXPECT_EQ(chain.propose(prompt, 3, kGreedy).tokens, (std::vector<Token>{30, 31, 32}));
}

// --- greedy exactness of trees in the decode loop ---------------------------------------------

// Prompts for the tiny target: random ones, and its own greedy continuation followed by the
// prompt again (repetitive: the lookup/n-gram trees are then partly right).
std::vector<std::vector<Token>> tree_prompts(Transformer& target, uint64_t seed) {
  Rng rng(seed);
  std::vector<std::vector<Token>> prompts;
  for (int i = 0; i < 4; ++i) {
    std::vector<Token> p = {1};
    const int len = 1 + static_cast<int>(rng.below(10));
    for (int j = 0; j < len; ++j) p.push_back(static_cast<Token>(3 + rng.below(290)));
    prompts.push_back(p);
    SpeculativeDecoder plain(target, nullptr);
    const auto cont = generate(plain, p, kGreedy, 30);
    std::vector<Token> repeat = p;
    repeat.insert(repeat.end(), cont.begin(), cont.end());
    repeat.insert(repeat.end(), p.begin(), p.end());
    prompts.push_back(repeat);
  }
  return prompts;
}

TEST(TreeExactness, ModelFreeTreesGreedyIdenticalToPlainForShapes) {
  const auto& trio = testing::tiny_trio();
  auto target = testing::load_single_threaded(trio.target);
  const auto prompts = tree_prompts(*target, testing::test_seed("TreeExactness model-free prompts"));
  std::vector<std::vector<Token>> expected;
  for (const auto& prompt : prompts) {
    SpeculativeDecoder plain(*target, nullptr);
    expected.push_back(generate(plain, prompt, kGreedy, 40));
  }
  const struct { int nodes, width, depth; } shapes[] = {{4, 2, 2}, {8, 2, 4}, {12, 3, 4}, {16, 4, 6}, {6, 6, 1}};
  int64_t n_tree_steps = 0;
  for (const auto& shape : shapes) {
    NgramConfig nc;
    nc.tree_width = shape.width;
    nc.tree_depth = shape.depth;
    PromptLookupConfig lc{1, 4};
    lc.tree_width = shape.width;
    lc.tree_depth = shape.depth;
    NgramDrafter ngram(nc);
    PromptLookupDrafter lookup(lc);
    for (Drafter* drafter : {static_cast<Drafter*>(&ngram), static_cast<Drafter*>(&lookup)}) {
      for (bool adaptive : {false, true}) {
        SpecConfig config;
        config.draft_max = shape.nodes;
        config.adaptive = adaptive;
        SpeculativeDecoder spec(*target, drafter, config);
        for (size_t i = 0; i < prompts.size(); ++i) {
          const auto& prompt = prompts[i];
          EXPECT_EQ(generate(spec, prompt, kGreedy, 40), expected[i])
              << drafter->name() << " tree " << shape.nodes << "/" << shape.width << "/" << shape.depth
              << (adaptive ? " adaptive" : " fixed") << ", prompt of " << prompt.size();
          n_tree_steps += spec.stats().n_tree_steps;
        }
      }
    }
  }
  EXPECT_GT(n_tree_steps, 0) << "no step verified a real tree";
}

TEST(TreeExactness, ModelFreeTreesOnStoriesGreedyIdenticalToPlain) {
  SPECDEC_FIXTURE(path, "models/stories260K.gguf");
  auto target = testing::load_single_threaded(path);
  const std::vector<Token> start{1, 403, 407, 261, 378};
  SpeculativeDecoder plain(*target, nullptr);
  const auto story = generate(plain, start, kGreedy, 60);
  std::vector<Token> repeat = start;
  repeat.insert(repeat.end(), story.begin(), story.begin() + 40);
  repeat.insert(repeat.end(), start.begin() + 1, start.end());
  for (const auto& prompt : {start, repeat}) {
    const int n_new = 128 - static_cast<int>(prompt.size());
    const auto expected = generate(plain, prompt, kGreedy, n_new);
    for (int width : {2, 3}) {
      PromptLookupConfig lc{1, 4};
      lc.tree_width = width;
      lc.tree_depth = 6;
      NgramConfig nc;
      nc.tree_width = width;
      PromptLookupDrafter lookup(lc);
      NgramDrafter ngram(nc);
      for (Drafter* drafter : {static_cast<Drafter*>(&lookup), static_cast<Drafter*>(&ngram)}) {
        SpecConfig config;
        config.draft_max = 12;
        config.adaptive = false;
        SpeculativeDecoder spec(*target, drafter, config);
        EXPECT_EQ(generate(spec, prompt, kGreedy, n_new), expected) << drafter->name() << " width " << width;
        const SpecStats& s = spec.stats();
        std::printf("[measure] stories260K %s tree width %d, prompt %zu: nodes/step %.2f, accepted depth %.2f, "
                    "tokens/pass %.2f, tree steps %lld of %lld\n",
                    drafter->name().c_str(), width, prompt.size(), s.mean_nodes_per_drafting_step(),
                    s.mean_accepted_depth(), s.mean_tokens_per_pass(), static_cast<long long>(s.n_tree_steps),
                    static_cast<long long>(s.n_drafting_steps));
      }
    }
  }
}

TEST(TreeStats, PerStepNodesAndAcceptedDepthAddUp) {
  const auto& trio = testing::tiny_trio();
  auto target = testing::load_single_threaded(trio.target);
  const auto prompts = tree_prompts(*target, 5);
  PromptLookupConfig lc{1, 4};
  lc.tree_width = 3;
  lc.tree_depth = 4;
  PromptLookupDrafter lookup(lc);
  SpecConfig config;
  config.draft_max = 10;
  config.adaptive = false;
  SpeculativeDecoder spec(*target, &lookup, config);
  int64_t n_steps = 0, n_nodes = 0, n_depth = 0, n_tree = 0;
  for (const auto& prompt : prompts) {
    spec.reset_stats();
    spec.begin(prompt, kGreedy);
    for (int s = 0; s < 15 && spec.remaining() > 0; ++s) {
      const auto emitted = spec.step(100);
      const StepInfo& info = spec.last_step();
      EXPECT_EQ(info.emitted, emitted);
      EXPECT_EQ(static_cast<int>(emitted.size()), info.n_accepted + 1);
      EXPECT_EQ(info.n_rows, info.n_drafted + 1);
      if (info.n_drafted > 0) {
        ++n_steps;
        n_nodes += info.n_drafted;
        n_depth += info.n_accepted;
      }
    }
    const SpecStats& st = spec.stats();
    n_tree += st.n_tree_steps;
    int64_t sum = 0, weighted = 0;
    for (size_t d = 0; d < st.steps_by_accepted_depth.size(); ++d) {
      sum += st.steps_by_accepted_depth[d];
      weighted += static_cast<int64_t>(d) * st.steps_by_accepted_depth[d];
    }
    EXPECT_EQ(sum, st.n_drafting_steps);
    EXPECT_EQ(weighted, st.n_accepted);
    EXPECT_LE(st.n_tree_steps, st.n_drafting_steps);
  }
  EXPECT_GT(n_steps, 0);
  EXPECT_GT(n_tree, 0);
  std::printf("[measure] lookup tree 10/3/4 on the tiny target: nodes/step %.2f accepted depth/step %.2f\n",
              double(n_nodes) / double(n_steps), double(n_depth) / double(n_steps));
}

// --- the draft model's trees ------------------------------------------------------------------

TEST(DraftModelTree, GreedyTreesAreReRankedToTheBudget) {
  const auto& trio = testing::tiny_trio();
  auto target = testing::load_single_threaded(trio.target);
  auto draft_model = testing::load_single_threaded(trio.noisy);
  for (int nodes : {3, 6, 10}) {
    DraftModelOptions dopt;
    dopt.tree_nodes = nodes;
    dopt.tree_width = 3;
    dopt.tree_depth = 5;
    DraftModelDrafter drafter(*draft_model, dopt);
    const std::vector<Token> context{1, 40, 41, 42};
    drafter.begin(context);
    const Draft d = drafter.propose(context, nodes, kGreedy);
    EXPECT_NO_THROW(validate_draft(d));
    EXPECT_EQ(d.size(), nodes) << "re-ranking fills the budget";
    const auto depths = node_depths(d);
    std::printf("[measure] draft tree budget %d: depth %d\n", nodes, *std::max_element(depths.begin(), depths.end()));
    // The cache holds the context, then each expanded node once (until accept()).
    EXPECT_EQ(drafter.cached_tokens().size(), context.size());
    EXPECT_EQ(drafter.cache().size(), static_cast<int>(context.size()) + drafter.last_expanded());
    EXPECT_GT(drafter.last_expanded(), 0);
    // The best child of the root is the draft's greedy token.
    DraftModelDrafter chain(*draft_model);
    chain.begin(context);
    EXPECT_EQ(d.tokens[0], chain.propose(context, 1, kGreedy).tokens[0]);
  }
}

// --- KV compaction after a deep branch that is not the first ----------------------------------

// Proposes, from the known greedy continuation `reference`, a tree whose right answer lies on the
// second branch of the root, two levels deep, behind wrong siblings. (A scripted tree: what is
// tested is the decoder's compaction of a non-prefix accepted path, not a drafter.)
class SecondBranchDrafter : public Drafter {
 public:
  SecondBranchDrafter(std::vector<Token> prompt, std::vector<Token> reference, int n_vocab)
      : prompt_(std::move(prompt)), reference_(std::move(reference)), n_vocab_(n_vocab) {}
  std::string name() const override { return "second-branch"; }
  void begin(std::span<const Token>) override {}
  Draft propose(std::span<const Token> context, int n_max, const SamplingParams&) override {
    Draft d;
    const size_t at = context.size() - prompt_.size();  // index of the next reference token
    if (n_max < 6 || at + 3 > reference_.size()) return d;
    auto wrong = [&](Token t) { return static_cast<Token>((t + 1 + static_cast<Token>(at % 7)) % n_vocab_); };
    const int w0 = d.add(wrong(reference_[at]), -1);
    d.add(wrong(reference_[at + 1]), w0);
    const int r0 = d.add(reference_[at], -1);
    d.add(wrong(reference_[at + 1]), r0);
    const int r1 = d.add(reference_[at + 1], r0);
    d.add(reference_[at + 2], r1);
    return d;
  }
  void accept(const Draft&, const Verdict& verdict) override { paths.push_back(verdict.path); }
  std::vector<std::vector<int32_t>> paths;

 private:
  std::vector<Token> prompt_, reference_;
  int n_vocab_;
};

TEST(TreeKvCompaction, DeepSecondBranchEqualsAFreshRunBitForBit) {
  const auto& trio = testing::tiny_trio();
  auto target = testing::load_single_threaded(trio.target);
  const std::vector<Token> prompt{1, 60, 61, 62, 63};
  SpeculativeDecoder plain(*target, nullptr);
  const auto reference = generate(plain, prompt, kGreedy, 40);
  SecondBranchDrafter drafter(prompt, reference, target->config().n_vocab);
  SpecConfig config;
  config.draft_max = 6;
  config.adaptive = false;
  SpeculativeDecoder spec(*target, &drafter, config);
  spec.begin(prompt, kGreedy);
  std::vector<Token> out;
  while (out.size() + 4 <= reference.size()) {
    const auto emitted = spec.step(100);
    out.insert(out.end(), emitted.begin(), emitted.end());
    ASSERT_EQ(std::vector<Token>(reference.begin(), reference.begin() + static_cast<std::ptrdiff_t>(out.size())), out);
    const std::vector<Token> committed(spec.tokens().begin(), spec.tokens().end() - 1);
    ASSERT_TRUE(testing::cache_equals_fresh(*target, spec.target_cache(), committed)) << "after " << out.size();
  }
  ASSERT_FALSE(drafter.paths.empty());
  for (const auto& path : drafter.paths) EXPECT_EQ(path, (std::vector<int32_t>{2, 4, 5}));
  EXPECT_EQ(spec.stats().n_tree_steps, static_cast<int64_t>(drafter.paths.size()));
  ASSERT_GE(spec.stats().steps_by_accepted_depth.size(), 4u);
  EXPECT_EQ(spec.stats().steps_by_accepted_depth[3], static_cast<int64_t>(drafter.paths.size()));
}

}  // namespace
}  // namespace specdec
