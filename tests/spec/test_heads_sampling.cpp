// Self-speculation drafters under speculative SAMPLING: with a tiny random target over an
// 8-token vocabulary and random heads, the first 3 generated tokens follow the target's exact
// distribution (chi-square over all 512 sequences) for Medusa trees and EAGLE chains/trees under
// every child rule (also EAGLE-3 style fused layers and a reduced draft vocabulary), at temperature 1 and at 0.7 with
// top-k/top-p. Planted bugs are REJECTED.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sampling/chi_square.h"
#include "spec/exact_sequences.h"
#include "spec/heads_setup.h"
#include "specdec/heads_drafter.h"

namespace specdec {
namespace {

using testing::plain_t1;
using testing::truncated_t07;

using testing::kFamilyAlpha;
const std::vector<Token> kPrompt = {1, 5};

struct Setup {
  std::string name;
  SamplingParams sampling;
  int k = 6;
  bool adaptive = false;
  // Builds the drafter for the micro target (heads loaded once per family).
  std::function<std::unique_ptr<Drafter>(Transformer&, MedusaHeads&, EagleLayer&)> make;
  bool fused = false;  // EAGLE: the layer with EAGLE-3 style fusion (micro_heads().eagle_fused)
  bool reduced_vocab = false;  // EAGLE: the layer with a draft vocabulary (micro_heads().eagle_vocab)
};

Setup medusa(const std::string& name, SamplingParams s, std::vector<std::vector<int>> choices, PlantedBug bug = PlantedBug::None) {
  return {name, s, 6, false, [choices, bug](Transformer& t, MedusaHeads& h, EagleLayer&) {
            MedusaOptions o;
            o.choices = choices;
            o.bug = bug;
            return std::unique_ptr<Drafter>(new MedusaDrafter(t, h, o));
          }};
}

Setup eagle(const std::string& name, SamplingParams s, int width, ChildRule rule, PlantedBug bug = PlantedBug::None,
            bool fused = false, bool reduced_vocab = false) {
  return {name, s, 6, false,
          [width, rule, bug](Transformer& t, MedusaHeads&, EagleLayer& l) {
            EagleOptions o;
            o.tree_width = o.sampled_tree_width = width;
            o.tree_depth = 3;
            o.tree_rule = rule;
            o.bug = bug;
            return std::unique_ptr<Drafter>(new EagleDrafter(t, l, o));
          },
          fused, reduced_vocab};
}

void check_family(const std::vector<Setup>& setups, bool expect_pass, const char* test_name) {
  auto target = testing::load_single_threaded(testing::micro_trio().target);
  auto heads = MedusaHeads::load(testing::micro_heads().medusa, *target);
  auto layer = EagleLayer::load(testing::micro_heads().eagle, *target);
  auto fused_layer = EagleLayer::load(testing::micro_heads().eagle_fused, *target);
  auto vocab_layer = EagleLayer::load(testing::micro_heads().eagle_vocab, *target);
  const uint64_t seed = testing::test_seed(test_name);
  const double threshold = kFamilyAlpha / static_cast<double>(setups.size());
  for (size_t i = 0; i < setups.size(); ++i) {
    const Setup& setup = setups[i];
    const auto exact = testing::exact_first_three(*target, setup.sampling, kPrompt);
    auto drafter = setup.make(*target, *heads, setup.fused ? *fused_layer : setup.reduced_vocab ? *vocab_layer : *layer);
    SpecConfig config;
    config.draft_max = setup.k;
    config.adaptive = setup.adaptive;
    config.probe_interval = 3;
    SpeculativeDecoder decoder(*target, drafter.get(), config);
    // Fewer trials under sanitizers; a planted bug's detection is then not required (its power
    // needs every trial: testing::detection_power_checked).
    const int n_trials = expect_pass ? 15000 / testing::sanitizer_slowdown() : testing::planted_bug_trials(15000);
    Rng seeds(seed + i);
    std::vector<int64_t> counts(testing::kThreeTokenCells, 0);
    SamplingParams sampling = setup.sampling;
    for (int t = 0; t < n_trials; ++t) {
      sampling.seed = seeds.next_u64();
      const auto out = testing::generate(decoder, kPrompt, sampling, 3);
      ++counts[static_cast<size_t>(out[0] * 64 + out[1] * 8 + out[2])];
    }
    const auto r = testing::chi_square_test(counts, exact);
    std::printf("[measure] %s: %s acceptance %.3f chi2 %.1f df %d p %.3g\n", test_name, setup.name.c_str(),
                decoder.stats().acceptance_rate(), r.statistic, r.df, r.p_value);
    EXPECT_GT(decoder.stats().n_drafted, 0) << setup.name;
    if (expect_pass) {
      EXPECT_GT(r.p_value, threshold) << setup.name << ": " << r.detail;
    } else if (testing::detection_power_checked()) {
      EXPECT_LT(r.p_value, threshold) << setup.name << ": the planted bug was NOT detected";
    } else {
      std::printf("[sanitizer] %s: detection not required in this build (the Release build requires it)\n",
                  setup.name.c_str());
    }
  }
}

// Temperature 1.6: q at temperature 1 differs from the transformed q on every token.
SamplingParams hot() {
  SamplingParams s = plain_t1();
  s.temperature = 1.6f;
  return s;
}

const std::vector<std::vector<int>> kSmallTree = {{0}, {1}, {0, 0}, {2}, {0, 1}, {1, 0}};

TEST(HeadsSampling, MedusaFirstThreeTokensMatchExactTarget) {
  check_family({medusa("t1 default tree", plain_t1(), {}), medusa("t1 small tree", plain_t1(), kSmallTree),
                medusa("t0.7 topk topp default tree", truncated_t07(), {}),
                medusa("t0.7 topk topp chain", truncated_t07(), {{0}, {0, 0}, {0, 0, 0}}),
                medusa("t1.6 small tree", hot(), kSmallTree)},
               true, "HeadsSampling.Medusa");
}

TEST(HeadsSampling, EagleFirstThreeTokensMatchExactTarget) {
  check_family({eagle("t1 chain", plain_t1(), 1, ChildRule::IndependentWithReplacement),
                eagle("t1 without replacement", plain_t1(), 2, ChildRule::WithoutReplacement),
                eagle("t1 with replacement", plain_t1(), 2, ChildRule::IndependentWithReplacement),
                eagle("t1 deterministic", plain_t1(), 2, ChildRule::Deterministic),
                eagle("t0.7 topk topp without replacement", truncated_t07(), 2, ChildRule::WithoutReplacement),
                eagle("t0.7 topk topp deterministic", truncated_t07(), 3, ChildRule::Deterministic),
                eagle("t1.6 without replacement", hot(), 2, ChildRule::WithoutReplacement)},
               true, "HeadsSampling.Eagle");
}

TEST(HeadsSampling, FusedEagleFirstThreeTokensMatchExactTarget) {
  check_family({eagle("fused t1 without replacement", plain_t1(), 2, ChildRule::WithoutReplacement, PlantedBug::None, true),
                eagle("fused t1 deterministic", plain_t1(), 3, ChildRule::Deterministic, PlantedBug::None, true),
                eagle("fused t1.6 chain", hot(), 1, ChildRule::IndependentWithReplacement, PlantedBug::None, true)},
               true, "HeadsSampling.FusedEagle");
}

// A draft vocabulary gives q = 0 outside it: the target's other tokens come only from the
// residual distribution, which must still give the exact target distribution.
TEST(HeadsSampling, DraftVocabularyEagleFirstThreeTokensMatchExactTarget) {
  check_family({eagle("draft vocab t1 chain", plain_t1(), 1, ChildRule::IndependentWithReplacement, PlantedBug::None, false, true),
                eagle("draft vocab t1 without replacement", plain_t1(), 2, ChildRule::WithoutReplacement, PlantedBug::None, false, true),
                eagle("draft vocab t0.7 topk topp deterministic", truncated_t07(), 2, ChildRule::Deterministic, PlantedBug::None,
                      false, true)},
               true, "HeadsSampling.DraftVocabEagle");
}

TEST(HeadsSamplingPlantedBugs, AreRejected) {
  check_family({medusa("medusa top-k recorded as sampled", plain_t1(), kSmallTree, PlantedBug::DeterministicAsSampled),
                eagle("eagle q recorded without the transform", hot(), 2, ChildRule::WithoutReplacement,
                      PlantedBug::TransformOnPOnly)},
               false, "HeadsSampling.PlantedBugs");
}

}  // namespace
}  // namespace specdec
