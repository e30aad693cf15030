// Greedy speculative decoding is token-for-token identical to plain greedy decoding of the
// target, for perfect, partly right and wrong drafts, chains of K in {1, 2, 4, 8}, adaptive K
// and token trees; on tiny random models and on the stories260K fixture.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/testing.h"
#include "spec/spec_models.h"
#include "specdec/draft_model.h"
#include "specdec/rng.h"
#include "specdec/speculative.h"
#include "specdec/make_model.h"

namespace specdec {
namespace {

using testing::generate;
using testing::greedy_params;

std::vector<std::vector<Token>> random_prompts(uint64_t seed, int n_prompts, int n_vocab) {
  Rng rng(seed);
  std::vector<std::vector<Token>> prompts;
  for (int i = 0; i < n_prompts; ++i) {
    std::vector<Token> p = {1};  // BOS
    const int len = static_cast<int>(rng.below(12));
    for (int j = 0; j < len; ++j) p.push_back(static_cast<Token>(3 + rng.below(static_cast<uint64_t>(n_vocab - 3))));
    prompts.push_back(p);
  }
  return prompts;
}

struct GreedyOutcome {
  double acceptance_rate = 0.0;
  double tokens_per_pass = 0.0;
  int64_t n_target_passes = 0;
  SpecStats stats;
};

// For every prompt: plain greedy vs speculative greedy with `draft_path` and `config`.
GreedyOutcome expect_greedy_identical(const std::string& target_path, const std::string& draft_path, const SpecConfig& config,
                                const std::vector<std::vector<Token>>& prompts, int n_new, const DraftModelOptions& dopt = {},
                                DType kv_type = DType::F32) {
  auto target = testing::load_single_threaded(target_path, kv_type);
  auto draft_model = testing::load_single_threaded(draft_path, kv_type);
  SpeculativeDecoder plain(*target, nullptr);
  DraftModelDrafter model_drafter(*draft_model, dopt);
  // Adaptive runs see a free drafter so that K varies (tiny drafts cost as much as the target).
  testing::ClockFreeDrafter clock_free(model_drafter);
  Drafter* drafter = config.adaptive ? static_cast<Drafter*>(&clock_free) : &model_drafter;
  SpeculativeDecoder spec(*target, drafter, config);
  for (const auto& prompt : prompts) {
    const auto expected = generate(plain, prompt, greedy_params(), n_new);
    const auto got = generate(spec, prompt, greedy_params(), n_new);
    EXPECT_EQ(got, expected) << "draft " << draft_path << " K=" << config.draft_max
                             << (config.adaptive ? " adaptive" : " fixed") << " tree_nodes=" << dopt.tree_nodes
                             << " prompt size " << prompt.size();
    if (got != expected) break;
  }
  const auto& stats = spec.stats();
  return {stats.acceptance_rate(), stats.mean_tokens_per_pass(), stats.n_target_passes, stats};
}

TEST(SpeculativeGreedy, IdenticalToPlainForAllDraftsAndK) {
  const auto& trio = testing::tiny_trio();
  const auto prompts = random_prompts(testing::test_seed("SpeculativeGreedy prompts"), 6, 300);
  for (int k : {1, 2, 4, 8}) {
    SpecConfig config;
    config.draft_max = k;
    config.adaptive = false;
    const GreedyOutcome self = expect_greedy_identical(trio.target, trio.target, config, prompts, 40);
    EXPECT_EQ(self.acceptance_rate, 1.0) << "the target drafting for itself must be always accepted (K=" << k << ")";
    // Every pass emits K + 1 tokens but the last, capped by the 40 tokens asked for.
    EXPECT_EQ(self.n_target_passes, static_cast<int64_t>(prompts.size()) * ((40 + k) / (k + 1))) << "K=" << k;
    const GreedyOutcome noisy = expect_greedy_identical(trio.target, trio.noisy, config, prompts, 40);
    const GreedyOutcome wrong = expect_greedy_identical(trio.target, trio.unrelated, config, prompts, 40);
    std::printf("[measure] greedy K=%d acceptance: self %.3f noisy %.3f unrelated %.3f\n", k, self.acceptance_rate,
                noisy.acceptance_rate, wrong.acceptance_rate);
    EXPECT_LT(noisy.acceptance_rate, 1.0);
    EXPECT_GT(noisy.acceptance_rate, wrong.acceptance_rate);
  }
}

TEST(SpeculativeGreedy, AdaptiveKIdenticalToPlain) {
  const auto& trio = testing::tiny_trio();
  const auto prompts = random_prompts(testing::test_seed("SpeculativeGreedy adaptive prompts"), 4, 300);
  SpecConfig config;
  config.draft_max = 8;
  config.draft_min = 0;
  config.adaptive = true;
  config.probe_interval = 5;
  const GreedyOutcome adaptive = expect_greedy_identical(trio.target, trio.noisy, config, prompts, 50);
  // The rule must have mixed plain steps (probes at least) with drafts.
  EXPECT_GT(adaptive.stats.n_drafting_steps, 0);
  EXPECT_GT(adaptive.stats.n_target_passes, adaptive.stats.n_drafting_steps) << "no plain steps";
  std::printf("[measure] greedy adaptive: %lld passes, %lld drafting, %lld with K >= 2\n",
              static_cast<long long>(adaptive.stats.n_target_passes),
              static_cast<long long>(adaptive.stats.n_drafting_steps),
              static_cast<long long>(adaptive.stats.drafted_by_pos.size() > 1 ? adaptive.stats.drafted_by_pos[1] : 0));
  config.draft_p_min = 0.6f;
  expect_greedy_identical(trio.target, trio.noisy, config, prompts, 50);
}

TEST(SpeculativeGreedy, DraftPMinEndsDraftsEarlyAndStaysExact) {
  const auto& trio = testing::tiny_trio();
  const auto prompts = random_prompts(testing::test_seed("SpeculativeGreedy p_min prompts"), 4, 300);
  SpecConfig config;
  config.draft_max = 8;
  config.adaptive = false;
  const GreedyOutcome full = expect_greedy_identical(trio.target, trio.noisy, config, prompts, 40);
  config.draft_p_min = 0.6f;  // the decoder hands it to the drafter (Drafter::set_p_min)
  const GreedyOutcome early = expect_greedy_identical(trio.target, trio.noisy, config, prompts, 40);
  const SpecStats& stopped = early.stats;
  std::printf("[measure] K=8 nodes per drafting step: p_min 0 %.2f, p_min 0.6 %.2f\n",
              full.stats.mean_nodes_per_drafting_step(), stopped.mean_nodes_per_drafting_step());
  EXPECT_GT(full.stats.mean_nodes_per_drafting_step(), 6.0) << "without p_min, drafts run to K but near the end";
  EXPECT_LT(stopped.mean_nodes_per_drafting_step(), full.stats.mean_nodes_per_drafting_step() - 1.0)
      << "p_min 0.6 must end low-confidence drafts early";
  EXPECT_GT(stopped.n_drafting_steps, 0);
}

TEST(SpeculativeGreedy, TreesIdenticalToPlainForShapes) {
  const auto& trio = testing::tiny_trio();
  const auto prompts = random_prompts(testing::test_seed("SpeculativeGreedy tree prompts"), 4, 300);
  const struct { int nodes, width, depth; } shapes[] = {{4, 2, 2}, {8, 2, 4}, {12, 3, 4}, {16, 4, 6}};
  for (const auto& shape : shapes) {
    DraftModelOptions dopt;
    dopt.tree_nodes = shape.nodes;
    dopt.tree_width = shape.width;
    dopt.tree_depth = shape.depth;
    SpecConfig config;
    config.draft_max = shape.nodes;
    config.adaptive = false;
    const GreedyOutcome noisy = expect_greedy_identical(trio.target, trio.noisy, config, prompts, 40, dopt);
    const GreedyOutcome self = expect_greedy_identical(trio.target, trio.target, config, prompts, 40, dopt);
    expect_greedy_identical(trio.target, trio.unrelated, config, prompts, 40, dopt);
    std::printf("[measure] greedy tree %d/%d/%d tokens per pass: self %.2f noisy %.2f\n", shape.nodes, shape.width,
                shape.depth, self.tokens_per_pass, noisy.tokens_per_pass);
  }
}

// F16 KV caches (target and draft): chains and trees equal plain decoding with the same cache
// type, and the target drafting for itself is always accepted (batch invariance holds for F16).
TEST(SpeculativeGreedy, F16KvCacheIdenticalToPlain) {
  const auto& trio = testing::tiny_trio();
  const auto prompts = random_prompts(testing::test_seed("SpeculativeGreedy f16 prompts"), 4, 300);
  SpecConfig config;
  config.draft_max = 4;
  config.adaptive = false;
  const GreedyOutcome self = expect_greedy_identical(trio.target, trio.target, config, prompts, 40, {}, DType::F16);
  EXPECT_EQ(self.acceptance_rate, 1.0);
  const GreedyOutcome noisy = expect_greedy_identical(trio.target, trio.noisy, config, prompts, 40, {}, DType::F16);
  EXPECT_GT(noisy.acceptance_rate, 0.0);
  DraftModelOptions tree;
  tree.tree_nodes = 8;
  tree.tree_width = 2;
  tree.tree_depth = 4;
  config.draft_max = 8;
  const GreedyOutcome self_tree = expect_greedy_identical(trio.target, trio.target, config, prompts, 40, tree, DType::F16);
  // Drafting for itself with batch-invariant F16 caches, the root's best child is the target's
  // own argmax, so no drafting step accepts nothing. (How deep the kept tree follows the greedy
  // chain depends on the random model's confidence: 8 nodes may favour siblings over depth 4,
  // so tokens per pass have no fixed bound; a bound of 4 failed for some prompt seeds.)
  ASSERT_FALSE(self_tree.stats.steps_by_accepted_depth.empty());
  EXPECT_GT(self_tree.stats.n_drafting_steps, 0);
  EXPECT_EQ(self_tree.stats.steps_by_accepted_depth[0], 0)
      << "drafting steps that accepted no token, of " << self_tree.stats.n_drafting_steps;
  {
    // Stronger, and exact: the accepted path always runs to a leaf, so every drafting step ends
    // with a bonus token (a kept node's best child is the target's argmax, and it is kept
    // whenever one of its siblings is).
    auto target = testing::load_single_threaded(trio.target, DType::F16);
    auto draft_model = testing::load_single_threaded(trio.target, DType::F16);
    DraftModelDrafter drafter(*draft_model, tree);
    SpeculativeDecoder spec(*target, &drafter, config);
    int n_drafting = 0;
    for (const auto& prompt : prompts) {
      spec.begin(prompt, greedy_params());
      for (int n = 0; n < 40 && spec.remaining() > 0;) {
        n += static_cast<int>(spec.step(40 - n).size());
        const StepInfo& info = spec.last_step();
        if (info.n_drafted == 0) continue;
        ++n_drafting;
        EXPECT_TRUE(info.bonus) << "a drafting step of " << info.n_drafted << " nodes accepted " << info.n_accepted
                                << " and ended in a rejection";
      }
    }
    EXPECT_GT(n_drafting, 0);
  }
  expect_greedy_identical(trio.target, trio.noisy, config, prompts, 40, tree, DType::F16);
}

TEST(SpeculativeGreedy, StoriesWithNoisyCopyIdenticalToPlain) {
  SPECDEC_FIXTURE(path, "models/stories260K.gguf");
  const std::string noisy = testing::temp_dir() + "/stories_noisy.gguf";
  make_noisy_copy(path, noisy, 0.2f, 3);
  const std::vector<std::vector<Token>> prompts = {{1, 403, 407, 261, 378}, {1}, {1, 300, 301}, {1, 42, 7, 99}};
  for (int k : {1, 4, 8}) {
    SpecConfig config;
    config.draft_max = k;
    config.adaptive = false;
    const GreedyOutcome noisy_outcome = expect_greedy_identical(path, noisy, config, prompts, 60);
    const GreedyOutcome self = expect_greedy_identical(path, path, config, prompts, 60);
    EXPECT_EQ(self.acceptance_rate, 1.0);
    std::printf("[measure] stories260K greedy K=%d noisy-copy acceptance %.3f, %.2f tokens/pass\n", k,
                noisy_outcome.acceptance_rate, noisy_outcome.tokens_per_pass);
  }
}

TEST(SpeculativeGreedy, StoriesGoldenContinuation) {
  // The plain loop itself reproduces llama.cpp's greedy text (the golden token ids are checked
  // by the model tests; here the speculative loop must give the same ids as the plain loop).
  SPECDEC_FIXTURE(path, "models/stories260K.gguf");
  auto target = testing::load_single_threaded(path);
  SpeculativeDecoder plain(*target, nullptr);
  DraftModelDrafter drafter(*target);  // the target drafting for itself, sharing the weights
  SpecConfig config;
  config.draft_max = 6;
  SpeculativeDecoder spec(*target, &drafter, config);
  const std::vector<Token> prompt = {1, 403, 407, 261, 378};
  const int n_new = 128 - static_cast<int>(prompt.size());
  EXPECT_EQ(generate(spec, prompt, greedy_params(), n_new), generate(plain, prompt, greedy_params(), n_new));
}

}  // namespace
}  // namespace specdec
