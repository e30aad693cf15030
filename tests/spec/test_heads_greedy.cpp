// Self-speculation drafters (Medusa, EAGLE) under greedy decoding: output identical to plain
// decoding over many prompts and tree shapes, the EAGLE layer's cache equal to a fresh run on
// the target's true features, and the stories260K fixture with random heads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "spec/heads_setup.h"
#include "specdec/error.h"
#include "specdec/heads_drafter.h"
#include "specdec/rng.h"

namespace specdec {
namespace {

using testing::generate;
using testing::greedy_params;

std::vector<std::vector<Token>> random_prompts(uint64_t seed, int n_vocab, int count) {
  Rng rng(seed);
  std::vector<std::vector<Token>> prompts;
  for (int i = 0; i < count; ++i) {
    std::vector<Token> p = {1};
    const int len = 1 + static_cast<int>(rng.below(12));
    for (int j = 0; j < len; ++j) p.push_back(static_cast<Token>(rng.below(static_cast<uint64_t>(n_vocab))));
    prompts.push_back(p);
  }
  return prompts;
}

// Generates n_new tokens after every prompt with and without the drafter; returns the acceptance.
// require_drafts: the drafter must have proposed something (false only where drafting nothing is
// a correct outcome: adaptive K with draft_min 0 stops drafting when drafts do not pay).
double expect_greedy_identical(Transformer& target, Drafter& drafter, const SpecConfig& config,
                               const std::vector<std::vector<Token>>& prompts, int n_new, const std::string& label,
                               bool require_drafts = true) {
  SpeculativeDecoder plain(target, nullptr);
  SpeculativeDecoder spec(target, &drafter, config);
  for (const auto& prompt : prompts) {
    const auto expected = generate(plain, prompt, greedy_params(), n_new);
    const auto got = generate(spec, prompt, greedy_params(), n_new);
    EXPECT_EQ(got, expected) << label << ", prompt of " << prompt.size() << " tokens";
  }
  const double acceptance = spec.stats().acceptance_rate();
  std::printf("[measure] %s: acceptance %.3f, tokens/pass %.2f\n", label.c_str(), acceptance,
              spec.stats().mean_tokens_per_pass());
  if (require_drafts) {
    EXPECT_GT(spec.stats().n_drafted, 0) << label << ": nothing was drafted";
  }
  return acceptance;
}

SpecConfig fixed_k(int k) {
  SpecConfig c;
  c.draft_max = k;
  c.adaptive = false;
  return c;
}

TEST(HeadsGreedy, MedusaMatchesPlainDecodingOverTreeShapes) {
  const uint64_t seed = testing::test_seed("HeadsGreedy.Medusa");
  for (const std::string& path : {testing::micro_trio().target, testing::tiny_trio().target}) {
    auto target = testing::load_single_threaded(path);
    const auto& files = path == testing::micro_trio().target ? testing::micro_heads() : testing::tiny_heads();
    auto heads = MedusaHeads::load(files.medusa, *target);
    const auto prompts = random_prompts(seed, target->config().n_vocab, 8);
    const std::vector<std::pair<std::string, std::vector<std::vector<int>>>> shapes = {
        {"default tree", {}},
        {"chain", {{0}, {0, 0}, {0, 0, 0}, {0, 0, 0, 0}}},
        {"wide", {{0}, {1}, {2}, {3}, {0, 0}, {1, 0}, {0, 1}, {2, 0}, {0, 0, 0}}},
    };
    for (const auto& [name, choices] : shapes) {
      for (int k : {3, 8, 24}) {
        MedusaOptions options;
        options.choices = choices;
        MedusaDrafter drafter(*target, *heads, options);
        expect_greedy_identical(*target, drafter, fixed_k(k), prompts, 20,
                                "medusa " + name + " K=" + std::to_string(k) + " vocab " +
                                    std::to_string(target->config().n_vocab));
      }
    }
    // Adaptive K picks from measured costs: with draft_min 0 it may rightly draft nothing (random
    // heads on the 300-token vocabulary land ~0.5% of drafts; CI once saw 0 drafts under load),
    // so drafts are required only with draft_min 1, where every step still drafts.
    for (int draft_min : {0, 1}) {
      MedusaDrafter adaptive(*target, *heads);
      SpecConfig config;
      config.draft_min = draft_min;
      config.draft_max = 8;
      config.probe_interval = 3;
      expect_greedy_identical(*target, adaptive, config, prompts, 20,
                              "medusa adaptive, draft_min " + std::to_string(draft_min), draft_min > 0);
    }
  }
}

// A file's tuned tree (medusa.tree_choices) replaces the default tree: the same drafts as that
// tree given as options, never more nodes per pass than it has, and output equal to plain.
TEST(HeadsGreedy, MedusaUsesTheTreeStoredInItsFile) {
  const uint64_t seed = testing::test_seed("HeadsGreedy.MedusaFileTree");
  auto target = testing::load_single_threaded(testing::tiny_trio().target);
  testing::MedusaFileSpec spec;
  spec.n_heads = 4;
  spec.seed = 43;  // the weights of tiny_heads()
  spec.scale = 2.0f;
  spec.tree = "0;1;0,0";
  const std::string path = testing::temp_dir() + "/tiny_tree_medusa.gguf";
  testing::write_random_medusa(path, *target, spec);
  auto heads = MedusaHeads::load(path, *target);
  const auto prompts = random_prompts(seed, target->config().n_vocab, 6);
  MedusaDrafter from_file(*target, *heads);
  MedusaOptions options;
  options.choices = {{0}, {1}, {0, 0}};
  MedusaDrafter from_options(*target, *heads, options);
  MedusaDrafter default_tree(*target, *heads, MedusaOptions{MedusaDrafter::default_choices(), {}});
  SpeculativeDecoder plain(*target, nullptr);
  SpeculativeDecoder spec_file(*target, &from_file, fixed_k(24));
  SpeculativeDecoder spec_options(*target, &from_options, fixed_k(24));
  SpeculativeDecoder spec_default(*target, &default_tree, fixed_k(24));
  for (const auto& prompt : prompts) {
    const auto expected = generate(plain, prompt, greedy_params(), 16);
    EXPECT_EQ(generate(spec_file, prompt, greedy_params(), 16), expected);
    EXPECT_EQ(generate(spec_options, prompt, greedy_params(), 16), expected);
    EXPECT_EQ(generate(spec_default, prompt, greedy_params(), 16), expected);
  }
  EXPECT_EQ(spec_file.stats().n_drafted, spec_options.stats().n_drafted);
  EXPECT_EQ(spec_file.stats().n_accepted, spec_options.stats().n_accepted);
  EXPECT_GT(spec_file.stats().n_drafted, 0);
  EXPECT_LE(spec_file.stats().n_drafted, 3 * spec_file.stats().n_target_passes);
  EXPECT_GT(spec_default.stats().n_drafted, 3 * spec_default.stats().n_target_passes);
}

// A drafter reading features gets the prompt's features and a catch_up() call inside begin(),
// so its first timed proposal does not pay for the prompt (with the prompt counted as seen, an
// EAGLE layer forwarding a whole prompt at its first proposal looked 5-8x costlier per token
// than it is, and adaptive K never drafted again). Output stays equal to plain decoding.
TEST(HeadsGreedy, FeatureDraftersCatchUpOnThePromptInBegin) {
  struct Recorder : testing::ForwardingDrafter {
    using ForwardingDrafter::ForwardingDrafter;
    void set_features(std::span<const float> features, int n_embd) override {
      n_feature_rows = static_cast<int>(features.size()) / n_embd;
      ForwardingDrafter::set_features(features, n_embd);
    }
    void catch_up(std::span<const Token> prompt) override {
      caught_up.push_back({static_cast<int>(prompt.size()), n_feature_rows, n_proposals});
      ForwardingDrafter::catch_up(prompt);
    }
    Draft propose(std::span<const Token> context, int n_max, const SamplingParams& sampling) override {
      ++n_proposals;
      return ForwardingDrafter::propose(context, n_max, sampling);
    }
    struct Call { int prompt_size, feature_rows, proposals_before; };
    std::vector<Call> caught_up;
    int n_feature_rows = 0, n_proposals = 0;
  };
  const uint64_t seed = testing::test_seed("HeadsGreedy.CatchUp");
  auto target = testing::load_single_threaded(testing::tiny_trio().target);
  auto layer = EagleLayer::load(testing::tiny_heads().eagle, *target);
  EagleDrafter eagle(*target, *layer);
  Recorder recorder(eagle);
  SpeculativeDecoder plain(*target, nullptr);
  SpeculativeDecoder spec(*target, &recorder, fixed_k(4));
  for (const auto& prompt : random_prompts(seed, target->config().n_vocab, 4)) {
    const int calls = static_cast<int>(recorder.caught_up.size()), proposals = recorder.n_proposals;
    EXPECT_EQ(generate(spec, prompt, greedy_params(), 12), generate(plain, prompt, greedy_params(), 12));
    ASSERT_EQ(static_cast<int>(recorder.caught_up.size()), calls + 1) << "one catch_up per begin";
    const auto& call = recorder.caught_up.back();
    EXPECT_EQ(call.prompt_size, static_cast<int>(prompt.size()));
    EXPECT_EQ(call.feature_rows, static_cast<int>(prompt.size()) - 1) << "the prompt's features, shared before";
    EXPECT_EQ(call.proposals_before, proposals) << "before the first proposal";
  }
  EXPECT_GT(spec.stats().n_accepted + spec.stats().n_drafted, 0);
}

TEST(HeadsGreedy, EagleMatchesPlainDecodingOverTreeShapes) {
  const uint64_t seed = testing::test_seed("HeadsGreedy.Eagle");
  for (const std::string& path : {testing::micro_trio().target, testing::tiny_trio().target}) {
    auto target = testing::load_single_threaded(path);
    const auto& files = path == testing::micro_trio().target ? testing::micro_heads() : testing::tiny_heads();
    for (const std::string& file : {files.eagle, files.eagle_fused, files.eagle_vocab}) {
      auto layer = EagleLayer::load(file, *target);
      const auto prompts = random_prompts(seed + 1, target->config().n_vocab, 8);
      struct Shape { int width, depth, nodes, k; };
      for (const Shape& s : {Shape{1, 4, 0, 4}, Shape{2, 3, 0, 6}, Shape{2, 5, 8, 8}, Shape{3, 4, 12, 16}}) {
        EagleOptions options;
        options.tree_width = s.width;
        options.tree_depth = s.depth;
        options.tree_nodes = s.nodes;
        EagleDrafter drafter(*target, *layer, options);
        expect_greedy_identical(*target, drafter, fixed_k(s.k), prompts, 20,
                                std::string(layer->fuse_layers().empty() ? "eagle" : "fused eagle") +
                                    (layer->draft_vocab().empty() ? "" : " (draft vocab)") + " width " +
                                    std::to_string(s.width) + " depth " + std::to_string(s.depth) +
                                    " K=" + std::to_string(s.k) + " vocab " + std::to_string(target->config().n_vocab));
      }
    }
  }
}

// Records how many drafts branch (some node with two children) and how many nodes were drafted.
class BranchCounter : public testing::ForwardingDrafter {
 public:
  using ForwardingDrafter::ForwardingDrafter;
  Draft propose(std::span<const Token> context, int n_max, const SamplingParams& sampling) override {
    Draft draft = ForwardingDrafter::propose(context, n_max, sampling);
    std::vector<int> children(static_cast<size_t>(draft.size()) + 1, 0);  // (n_nodes + 1), root last
    for (int32_t parent : draft.parent) ++children[parent < 0 ? children.size() - 1 : static_cast<size_t>(parent)];
    n_branching += *std::max_element(children.begin(), children.end()) > 1 ? 1 : 0;
    n_nodes += draft.size();
    drafted.insert(drafted.end(), draft.tokens.begin(), draft.tokens.end());
    std::vector<int> depth(static_cast<size_t>(draft.size()), 1);  // (n_nodes) parents come first
    for (int i = 0; i < draft.size(); ++i) {
      const int32_t parent = draft.parent[static_cast<size_t>(i)];
      if (parent >= 0) depth[static_cast<size_t>(i)] = depth[static_cast<size_t>(parent)] + 1;
      max_depth = std::max(max_depth, depth[static_cast<size_t>(i)]);
    }
    return draft;
  }
  int n_branching = 0, n_nodes = 0, max_depth = 0;
  std::vector<Token> drafted;  // every drafted token
};

// EagleOptions: greedy proposals are width-2 trees, sampled ones chains unless
// sampled_tree_width says otherwise.
TEST(HeadsTrees, EagleBranchesWhenGreedyAndDraftsChainsWhenSampling) {
  auto target = testing::load_single_threaded(testing::tiny_trio().target);
  auto layer = EagleLayer::load(testing::tiny_heads().eagle, *target);
  const SamplingParams t1 = testing::t1_params(testing::test_seed("HeadsTrees.EagleWidth"));
  struct Case { const char* name; SamplingParams sampling; int sampled_width; bool branches; };
  for (const Case& c : {Case{"greedy", greedy_params(), 1, true}, Case{"t1 default", t1, 1, false},
                        Case{"t1 sampled width 2", t1, 2, true}}) {
    EagleOptions options;
    ASSERT_EQ(options.tree_width, 2);
    ASSERT_EQ(options.sampled_tree_width, 1);
    options.sampled_tree_width = c.sampled_width;
    EagleDrafter eagle(*target, *layer, options);
    BranchCounter counter(eagle);
    SpeculativeDecoder spec(*target, &counter, fixed_k(6));
    generate(spec, {1, 5, 9, 13}, c.sampling, 30);
    EXPECT_GT(counter.n_nodes, 0) << c.name;
    EXPECT_EQ(counter.n_branching > 0, c.branches) << c.name << ": " << counter.n_branching << " branching drafts";
  }
}

// EagleOptions::tree_depth 0 (the default) lets a proposal go as deep as the node budget; a
// positive depth caps it. Chains (width 1) of a K = 12 budget, greedy and sampled.
TEST(HeadsTrees, EagleDraftsAsDeepAsTheBudgetUnlessCapped) {
  auto target = testing::load_single_threaded(testing::tiny_trio().target);
  auto layer = EagleLayer::load(testing::tiny_heads().eagle, *target);
  const SamplingParams t1 = testing::t1_params(testing::test_seed("HeadsTrees.EagleDepth"));
  for (const SamplingParams& sampling : {greedy_params(), t1}) {
    for (const int cap : {0, 5}) {
      EagleOptions options;
      ASSERT_EQ(options.tree_depth, 0);
      options.tree_width = options.sampled_tree_width = 1;
      options.tree_depth = cap;
      EagleDrafter eagle(*target, *layer, options);
      BranchCounter counter(eagle);
      SpeculativeDecoder spec(*target, &counter, fixed_k(12));
      generate(spec, {1, 5, 9, 13}, sampling, 40);
      EXPECT_EQ(counter.max_depth, cap == 0 ? 12 : cap) << "cap " << cap << (sampling.greedy() ? " greedy" : " T=1");
      EXPECT_EQ(counter.n_branching, 0);
    }
  }
  EagleOptions negative;
  negative.tree_depth = -1;
  EXPECT_THROW({ EagleDrafter bad(*target, *layer, negative); }, specdec::Error);
}

// A layer with eagle.draft_vocab drafts its ids only, greedy or sampling (trees and chains).
TEST(HeadsTrees, EagleDraftsOnlyItsDraftVocabulary) {
  auto target = testing::load_single_threaded(testing::tiny_trio().target);
  auto layer = EagleLayer::load(testing::tiny_heads().eagle_vocab, *target);
  const std::vector<Token> vocab = layer->draft_vocab();
  ASSERT_FALSE(vocab.empty());
  const SamplingParams t1 = testing::t1_params(testing::test_seed("HeadsTrees.EagleDraftVocab"));
  for (const SamplingParams& sampling : {greedy_params(), t1}) {
    EagleOptions options;
    options.sampled_tree_width = 2;
    EagleDrafter eagle(*target, *layer, options);
    BranchCounter counter(eagle);
    SpeculativeDecoder spec(*target, &counter, fixed_k(6));
    generate(spec, {1, 5, 9, 13}, sampling, 30);
    ASSERT_GT(counter.drafted.size(), 10u);
    for (Token x : counter.drafted) EXPECT_TRUE(std::binary_search(vocab.begin(), vocab.end(), x)) << "drafted " << x;
  }
}

// A fusion whose matrix selects f_t ([0 .. 0 I], the other tensors equal) is the unfused layer:
// every proposal, hence every step's acceptance, is the same (x + 0 * y is exact).
TEST(HeadsGreedy, FusionSelectingTheFinalFeatureDraftsAsTheUnfusedLayer) {
  const uint64_t seed = testing::test_seed("HeadsGreedy.FusionSelect");
  auto target = testing::load_single_threaded(testing::micro_trio().target);
  auto plain_layer = EagleLayer::load(testing::micro_heads().eagle, *target);
  auto select_layer = EagleLayer::load(testing::micro_heads().eagle_select, *target);
  ASSERT_EQ(select_layer->fuse_layers(), testing::micro_heads().fuse_layers);
  ASSERT_EQ(select_layer->feature_width(),
            static_cast<int>(testing::micro_heads().fuse_layers.size() + 1) * target->config().n_embd);
  EagleDrafter plain_drafter(*target, *plain_layer), select_drafter(*target, *select_layer);
  SpeculativeDecoder a(*target, &plain_drafter, fixed_k(6)), b(*target, &select_drafter, fixed_k(6));
  for (const auto& prompt : random_prompts(seed, target->config().n_vocab, 12)) {
    a.begin(prompt, greedy_params());
    b.begin(prompt, greedy_params());
    for (int step = 0; step < 8; ++step) {
      EXPECT_EQ(a.step(24), b.step(24)) << "step " << step;
      EXPECT_EQ(a.stats().n_drafted, b.stats().n_drafted) << "step " << step;
      EXPECT_EQ(a.stats().n_accepted, b.stats().n_accepted) << "step " << step;
    }
  }
  // The 8-token vocabulary makes random drafts right now and then: the accepting path is
  // compared too.
  std::printf("[measure] select fusion: drafted %lld, accepted %lld\n", static_cast<long long>(b.stats().n_drafted),
              static_cast<long long>(b.stats().n_accepted));
  EXPECT_GT(b.stats().n_accepted, 0);
}

TEST(HeadsGreedy, RollbackKeepsDecodingIdentical) {
  auto target = testing::load_single_threaded(testing::tiny_trio().target);
  auto layer = EagleLayer::load(testing::tiny_heads().eagle, *target);
  auto heads = MedusaHeads::load(testing::tiny_heads().medusa, *target);
  EagleDrafter eagle(*target, *layer);
  MedusaDrafter medusa(*target, *heads);
  SpeculativeDecoder plain(*target, nullptr);
  const std::vector<Token> prompt = {1, 17, 42, 99};
  const auto expected = generate(plain, prompt, greedy_params(), 30);
  for (Drafter* drafter : {static_cast<Drafter*>(&eagle), static_cast<Drafter*>(&medusa)}) {
    SpeculativeDecoder spec(*target, drafter, fixed_k(6));
    auto first = generate(spec, prompt, greedy_params(), 12);
    // Cut back 5 tokens (as a stop string would), then continue.
    spec.rollback(static_cast<int>(prompt.size() + first.size() - 5));
    std::vector<Token> out(spec.tokens().begin() + static_cast<std::ptrdiff_t>(prompt.size()), spec.tokens().end());
    while (out.size() < expected.size()) {
      const auto emitted = spec.step(static_cast<int>(expected.size() - out.size()));
      out.insert(out.end(), emitted.begin(), emitted.end());
    }
    EXPECT_EQ(out, expected) << drafter->name();
  }
}

// With fusion the fresh run builds the verified rows itself: [residual after each fuse layer, in
// the file's order, f_t], through EagleLayer::fuse (the decoder's row layout checked bit for bit).
class EagleCache : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(HeadsGreedy, EagleCache, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Fused" : "Unfused"; });

TEST_P(EagleCache, EqualsAFreshRunOnTrueFeatures) {
  auto target = testing::load_single_threaded(testing::tiny_trio().target);
  auto layer = EagleLayer::load(GetParam() ? testing::tiny_heads().eagle_fused : testing::tiny_heads().eagle, *target);
  ASSERT_EQ(layer->fuse_layers().empty(), !GetParam());
  EagleOptions options;
  options.tree_width = 2;
  options.tree_depth = 4;
  EagleDrafter drafter(*target, *layer, options);
  SpeculativeDecoder spec(*target, &drafter, fixed_k(8));
  generate(spec, {1, 5, 9, 13}, greedy_params(), 25);
  const std::vector<Token> tokens(spec.tokens().begin(), spec.tokens().end());
  const int m = drafter.cache().size();  // entries 0..m-1, fed f_t and tokens[t + 1]
  ASSERT_GT(m, 4);
  ASSERT_LE(m + 1, static_cast<int>(tokens.size()));
  // The target's true features of tokens[0..m).
  KvCache target_cache = target->new_cache();
  Batch batch;
  for (int t = 0; t < m; ++t) batch.add(tokens[static_cast<size_t>(t)], t, t - 1, 0, false, true);
  Logits logits;
  Features features;
  features.layers = layer->fuse_layers();
  KvCache* caches[] = {&target_cache};
  target->forward(batch, caches, logits, &features);
  const size_t n_embd = static_cast<size_t>(target->config().n_embd);
  std::vector<float> verified;  // (m, feature_width)
  for (int t = 0; t < m; ++t) {
    for (size_t j = 0; j < features.layers.size(); ++j) {
      verified.insert(verified.end(), features.layer_row(t, static_cast<int>(j)), features.layer_row(t, static_cast<int>(j)) + n_embd);
    }
    verified.insert(verified.end(), features.row(t), features.row(t) + n_embd);
  }
  ASSERT_EQ(verified.size(), static_cast<size_t>(m) * layer->feature_width());
  std::vector<float> slots(static_cast<size_t>(m) * n_embd);  // (m, n_embd)
  layer->fuse(verified.data(), m, slots.data());
  if (!GetParam()) {
    EXPECT_EQ(slots, features.final);
  }
  KvCache fresh = layer->new_cache();
  batch.clear();
  for (int t = 0; t < m; ++t) batch.add(tokens[static_cast<size_t>(t) + 1], t, t - 1, 0, false);
  std::vector<float> out(static_cast<size_t>(m) * n_embd);  // (m, n_embd)
  layer->forward(batch, slots.data(), fresh, out.data());
  for (int s = 0; s < m; ++s) EXPECT_TRUE(drafter.cache().same_slot(s, fresh, s)) << "K/V of entry " << s;
}

TEST(HeadsGreedy, Stories260KWithRandomHeads) {
  SPECDEC_FIXTURE(path, "models/stories260K.gguf");
  auto target = testing::load_single_threaded(path);
  const auto files = testing::heads_for(path, "stories260K", 51);
  auto heads = MedusaHeads::load(files.medusa, *target);
  auto layer = EagleLayer::load(files.eagle, *target);
  MedusaDrafter medusa(*target, *heads);
  EagleDrafter eagle(*target, *layer);
  const std::vector<std::vector<Token>> prompts = {{1, 403, 407, 261, 378}, {1, 284, 5}, {1}};
  expect_greedy_identical(*target, medusa, fixed_k(10), prompts, 40, "stories260K medusa");
  expect_greedy_identical(*target, eagle, fixed_k(10), prompts, 40, "stories260K eagle");
}

}  // namespace
}  // namespace specdec
