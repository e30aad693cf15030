// Whole sequences under speculative SAMPLING: with tiny random models over an 8-token
// vocabulary, the distribution of the first 3 generated tokens equals the target's exact
// distribution (enumerated over all 512 sequences) for K = 1, K = 2 and adaptive K, at
// temperature 1 and at 0.7 with top-k/top-p, with penalties, and for token trees under every
// child rule. The planted bugs must be REJECTED by the same statistic.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/testing.h"
#include "sampling/chi_square.h"
#include "spec/exact_sequences.h"
#include "spec/spec_models.h"
#include "spec/synthetic.h"
#include "specdec/draft_model.h"
#include "specdec/rng.h"
#include "specdec/speculative.h"

namespace specdec {
namespace {

constexpr int kVocab = 8;
constexpr int kCells = kVocab * kVocab * kVocab;
using testing::kFamilyAlpha;
const std::vector<Token> kPrompt = {1, 5};

using testing::plain_t1;
using testing::truncated_t07;

SamplingParams with_penalties() {
  SamplingParams s = plain_t1();
  s.repeat_penalty = 1.5f;
  s.presence_penalty = 0.3f;
  s.frequency_penalty = 0.2f;
  return s;
}

std::vector<double> exact_distribution(Transformer& target, const SamplingParams& sampling) {
  return testing::exact_first_three(target, sampling, kPrompt);
}

struct Setup {
  std::string name;
  SamplingParams sampling;
  SpecConfig config;
  DraftModelOptions drafter;
  int trial_scale = 1;  // planted bugs with a small effect need more samples for the same power
};

Setup chain(const std::string& name, SamplingParams s, int k, bool adaptive) {
  Setup setup{name, s, {}, {}};
  setup.config.draft_max = k;
  setup.config.adaptive = adaptive;
  setup.config.probe_interval = 3;  // adaptive: plain steps mixed in
  // Adaptive: no shadow drafts, so the acceptance estimate comes from verified drafts and a
  // 1-token draft every 48 plain steps; with the clock-free drafter (run_setup) K then follows
  // the acceptance history and the measured verify costs.
  setup.config.shadow = false;
  return setup;
}

Setup tree(const std::string& name, SamplingParams s, ChildRule rule) {
  Setup setup{name, s, {}, {}};
  setup.config.draft_max = 6;
  setup.config.adaptive = false;
  setup.drafter.tree_nodes = 6;
  setup.drafter.tree_width = 2;
  setup.drafter.tree_depth = 3;
  setup.drafter.tree_rule = rule;
  return setup;
}

// Samples the first 3 tokens n_trials times and returns the chi-square result against exact.
testing::ChiSquareResult run_setup(const Setup& setup, Transformer& target, Transformer& draft_model,
                                   const std::vector<double>& exact, uint64_t seed, int n_trials,
                                   double* acceptance) {
  DraftModelDrafter model_drafter(draft_model, setup.drafter);
  // Adaptive setups see a free drafter, so that K varies (plain steps, shadows, K = 1..3).
  testing::ClockFreeDrafter clock_free(model_drafter);
  Drafter* drafter = setup.config.adaptive ? static_cast<Drafter*>(&clock_free) : &model_drafter;
  SpeculativeDecoder decoder(target, drafter, setup.config);
  Rng seeds(seed);
  std::vector<int64_t> counts(kCells, 0);
  SamplingParams sampling = setup.sampling;
  for (int t = 0; t < n_trials; ++t) {
    sampling.seed = seeds.next_u64();
    const auto out = testing::generate(decoder, kPrompt, sampling, 3);
    ++counts[static_cast<size_t>(out[0] * 64 + out[1] * 8 + out[2])];
  }
  const SpecStats& stats = decoder.stats();
  *acceptance = stats.acceptance_rate();
  if (setup.config.adaptive) {
    // The adaptive rule must actually have mixed plain steps with drafts of several lengths,
    // bonus tokens and second steps, or the test would check plain sampling only. Drafting
    // follows the measured costs: in a sanitizer build on a 2-core Zen 3 VM a 2-row forward of
    // these tiny models measured ~2 1-row ones, no K paid, and the rule rightly stayed plain
    // (BENCHMARKS 37d). There the drafting is not required; the fixed-K setups cover it.
    if (stats.n_drafting_steps > n_trials / 50) {
      EXPECT_GT(stats.n_emitted, stats.n_target_passes) << setup.name << ": no step emitted more than one token";
    } else if (decoder.drafting_can_pay()) {
      ADD_FAILURE() << setup.name << ": adaptive K barely drafted (" << stats.n_drafting_steps << " drafting steps)";
    } else {
      std::printf("[measure] %s: drafting cannot pay at the measured costs (c(2) %.2f): plain steps only\n",
                  setup.name.c_str(), decoder.estimated_verify_cost(2));
    }
    EXPECT_GT(stats.n_target_passes - stats.n_drafting_steps, n_trials / 50) << setup.name << ": no plain steps";
    // (K >= 2 is rare here: verify costs grow fast per row on models this small; fixed K = 2
    // covers those steps.)
    std::printf("[measure] %s: %lld plain steps, %lld drafting steps, %lld of them K >= 2\n", setup.name.c_str(),
                static_cast<long long>(stats.n_target_passes - stats.n_drafting_steps),
                static_cast<long long>(stats.n_drafting_steps),
                static_cast<long long>(stats.drafted_by_pos.size() > 1 ? stats.drafted_by_pos[1] : 0));
  }
  return testing::chi_square_test(counts, exact);
}

struct Models {
  std::unique_ptr<Transformer> target, draft;
};

Models micro_models() {
  const auto& trio = testing::micro_trio();
  return {testing::load_single_threaded(trio.target), testing::load_single_threaded(trio.noisy)};
}

// Runs every setup; returns the smallest p-value and the family threshold.
void check_family(const std::vector<Setup>& setups, bool expect_pass, const char* test_name) {
  Models m = micro_models();
  const uint64_t seed = testing::test_seed(test_name);
  const double threshold = kFamilyAlpha / static_cast<double>(setups.size());
  for (size_t i = 0; i < setups.size(); ++i) {
    const auto exact = exact_distribution(*m.target, setups[i].sampling);
    double acceptance = 0.0;
    // Losslessness families may run fewer trials under sanitizers (they pass either way); a
    // planted bug needs every trial to be detected, so under sanitizers it runs fewer and its
    // detection is not required (testing::detection_power_checked).
    const int n_trials = expect_pass ? 15000 / testing::sanitizer_slowdown()
                                     : testing::planted_bug_trials(15000 * setups[i].trial_scale);
    const auto r = run_setup(setups[i], *m.target, *m.draft, exact, seed + i, n_trials, &acceptance);
    std::printf("[measure] %s: %s acceptance %.3f chi2 %.1f df %d p %.3g\n", test_name, setups[i].name.c_str(),
                acceptance, r.statistic, r.df, r.p_value);
    if (expect_pass) {
      EXPECT_GT(r.p_value, threshold) << setups[i].name << ": " << r.detail;
    } else if (testing::detection_power_checked()) {
      EXPECT_LT(r.p_value, threshold) << setups[i].name << ": the planted bug was NOT detected";
    } else {
      std::printf("[sanitizer] %s: detection not required in this build (the Release build requires it)\n",
                  setups[i].name.c_str());
    }
  }
}

TEST(SpeculativeSampling, FirstThreeTokensMatchExactTargetChains) {
  check_family({chain("t1 K=1", plain_t1(), 1, false), chain("t1 K=2", plain_t1(), 2, false),
                chain("t1 adaptive", plain_t1(), 3, true), chain("t0.7 topk topp K=1", truncated_t07(), 1, false),
                chain("t0.7 topk topp K=2", truncated_t07(), 2, false),
                chain("t0.7 topk topp adaptive", truncated_t07(), 3, true),
                chain("penalties K=2", with_penalties(), 2, false)},
               true, "SpeculativeSampling.Chains");
}

TEST(SpeculativeSampling, FirstThreeTokensMatchExactTargetTrees) {
  check_family({tree("t1 deterministic", plain_t1(), ChildRule::Deterministic),
                tree("t1 with replacement", plain_t1(), ChildRule::IndependentWithReplacement),
                tree("t1 without replacement", plain_t1(), ChildRule::WithoutReplacement),
                tree("t0.7 without replacement", truncated_t07(), ChildRule::WithoutReplacement),
                tree("penalties with replacement", with_penalties(), ChildRule::IndependentWithReplacement)},
               true, "SpeculativeSampling.Trees");
}

Setup with_bug(Setup s, PlantedBug bug) {
  s.config.bug = bug;
  return s;
}

Setup with_drafter_bug(Setup s, PlantedBug bug) {
  s.drafter.bug = bug;
  return s;
}

Setup scaled(Setup s, int trial_scale) {
  s.trial_scale = trial_scale;
  return s;
}

TEST(SpeculativeSamplingPlantedBugs, AreRejected) {
  check_family({with_bug(chain("no residual", plain_t1(), 2, false), PlantedBug::NoResidual),
                with_bug(chain("unnormalised residual", plain_t1(), 2, false), PlantedBug::UnnormalisedResidual),
                with_bug(chain("bonus from wrong row", plain_t1(), 1, false), PlantedBug::BonusWrongRow),
                with_drafter_bug(chain("q recomputed after the fact", plain_t1(), 2, false), PlantedBug::QRecomputedAfter),
                with_drafter_bug(chain("transform on p only", truncated_t07(), 2, false), PlantedBug::TransformOnPOnly),
                with_bug(tree("tree residual update removed", plain_t1(), ChildRule::IndependentWithReplacement),
                         PlantedBug::NoResidual),
                // A small effect: chi2 excess ~20 per 15,000 trials on df 186 with the micro pair
                // (measured), so x16 trials (excess ~320, about 6 standard deviations clear of the
                // family threshold).
                scaled(with_bug(tree("tree q not renormalised", plain_t1(), ChildRule::WithoutReplacement),
                                PlantedBug::NoQRenormalise),
                       16)},
               false, "SpeculativeSamplingPlantedBugs");
}

}  // namespace
}  // namespace specdec
