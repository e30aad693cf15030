// The model-free drafters inside the real decode loop: greedy output identical to plain decoding
// on stories260K (n-gram, prompt lookup, hybrid with a draft model; lookups that run past EOS and
// into the context limit), and one sampling run (temperature > 0) whose output distribution is
// checked against the exact target distribution by chi-square.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <vector>

#include "common/testing.h"
#include "common/tiny_model.h"
#include "spec/spec_models.h"
#include "specdec/draft_model.h"
#include "specdec/hybrid_drafter.h"
#include "specdec/ngram.h"
#include "specdec/prompt_lookup.h"
#include "specdec/speculative.h"
#include "specdec/make_model.h"

namespace specdec {
namespace {

using testing::generate;
using testing::greedy_params;

constexpr Token kEos = 2;
const std::vector<Token> kOnceUponATime{1, 403, 407, 261, 378};

// Forwards every call to `inner` and records the proposals.
class RecordingDrafter : public testing::ForwardingDrafter {
 public:
  using ForwardingDrafter::ForwardingDrafter;
  Draft propose(std::span<const Token> context, int n_max, const SamplingParams& sampling) override {
    Draft d = ForwardingDrafter::propose(context, n_max, sampling);
    proposals.push_back(d.tokens);
    return d;
  }
  std::vector<std::vector<Token>> proposals;
};

SpecConfig fixed_k(int k) {
  SpecConfig c;
  c.draft_max = k;
  c.adaptive = false;
  return c;
}

// Plain greedy decoding to the context limit.
std::vector<Token> plain_greedy(Transformer& target, const std::vector<Token>& prompt) {
  SpeculativeDecoder plain(target, nullptr);
  return generate(plain, prompt, greedy_params(), 1000);
}

TEST(NgramExactness, GreedyIdenticalToPlainOnStories) {
  SPECDEC_FIXTURE(path, "models/stories260K.gguf");
  auto target = testing::load_single_threaded(path);
  const std::vector<Token> story = plain_greedy(*target, kOnceUponATime);
  ASSERT_EQ(kOnceUponATime.size() + story.size(), 128u) << "generation runs to the context limit";
  // A short prompt, and a long one made of a passage followed by its own beginning.
  std::vector<Token> repeat(kOnceUponATime);
  repeat.insert(repeat.end(), story.begin(), story.begin() + 40);
  repeat.insert(repeat.end(), kOnceUponATime.begin(), kOnceUponATime.end());
  for (const auto& prompt : {kOnceUponATime, repeat}) {
    const std::vector<Token> expected = plain_greedy(*target, prompt);
    for (SpecConfig config : {fixed_k(1), fixed_k(3), fixed_k(8), SpecConfig{}}) {
      NgramDrafter ngram;
      PromptLookupDrafter lookup(PromptLookupConfig{1, 4});
      for (Drafter* drafter : {static_cast<Drafter*>(&ngram), static_cast<Drafter*>(&lookup)}) {
        SpeculativeDecoder spec(*target, drafter, config);
        EXPECT_EQ(generate(spec, prompt, greedy_params(), 1000), expected)
            << drafter->name() << " K=" << config.draft_max << (config.adaptive ? " adaptive" : "")
            << " prompt of " << prompt.size();
        const SpecStats& stats = spec.stats();
        std::printf("[measure] stories260K greedy, prompt %zu, %s K=%d%s: acceptance %.3f, tokens/pass %.2f\n",
                    prompt.size(), drafter->name().c_str(), config.draft_max, config.adaptive ? " adaptive" : "",
                    stats.acceptance_rate(), stats.mean_tokens_per_pass());
        if (prompt.size() > 40 && !config.adaptive) {
          EXPECT_GT(stats.mean_tokens_per_pass(), 1.3) << "the repeated passage should be drafted well";
        }
      }
    }
  }
}

TEST(NgramExactness, HybridWithADraftModelIdenticalToPlain) {
  SPECDEC_FIXTURE(path, "models/stories260K.gguf");
  auto target = testing::load_single_threaded(path);
  const std::string noisy = testing::temp_dir() + "/stories260K-noisy-ngram.gguf";
  make_noisy_copy(path, noisy, 0.3f, 3);
  auto draft_model = testing::load_single_threaded(noisy);
  const std::vector<Token> story = plain_greedy(*target, kOnceUponATime);
  std::vector<Token> repeat(kOnceUponATime);
  repeat.insert(repeat.end(), story.begin(), story.begin() + 30);
  repeat.insert(repeat.end(), kOnceUponATime.begin(), kOnceUponATime.end());
  for (const auto& prompt : {kOnceUponATime, repeat}) {
    const std::vector<Token> expected = plain_greedy(*target, prompt);
    HybridDrafter hybrid(std::make_unique<PromptLookupDrafter>(),
                         std::make_unique<DraftModelDrafter>(*draft_model));
    SpeculativeDecoder spec(*target, &hybrid, fixed_k(4));
    EXPECT_EQ(generate(spec, prompt, greedy_params(), 1000), expected) << "prompt of " << prompt.size();
    std::printf("[measure] stories260K greedy hybrid, prompt %zu: lookup steps %lld, draft-model steps %lld, "
                "acceptance %.3f, tokens/pass %.2f\n",
                prompt.size(), static_cast<long long>(hybrid.n_lookup_steps()),
                static_cast<long long>(hybrid.n_fallback_steps()), spec.stats().acceptance_rate(),
                spec.stats().mean_tokens_per_pass());
    EXPECT_GT(hybrid.n_fallback_steps(), 0);
    if (prompt.size() > 30) {
      EXPECT_GT(hybrid.n_lookup_steps(), 0);
    }
    // The same hybrid serves a second request: both members follow the new sequence.
    EXPECT_EQ(generate(spec, kOnceUponATime, greedy_params(), 30), std::vector<Token>(story.begin(), story.begin() + 30));
  }
}

TEST(NgramExactness, LookupsPastEosAndTheContextLimit) {
  SPECDEC_FIXTURE(path, "models/stories260K.gguf");
  auto target = testing::load_single_threaded(path);
  const std::vector<Token> story = plain_greedy(*target, kOnceUponATime);
  // The story's first tokens each followed by EOS, then the story's beginning: whenever the model
  // says one of those tokens again, the lookup (suffix of 1) proposes EOS and what followed it.
  // Generation then runs into the context limit.
  std::vector<Token> prompt(kOnceUponATime);
  for (size_t i = 0; i < 25; ++i) {
    prompt.push_back(story[i]);
    prompt.push_back(kEos);
  }
  prompt.insert(prompt.end(), kOnceUponATime.begin(), kOnceUponATime.end());
  const std::vector<Token> expected = plain_greedy(*target, prompt);
  for (int k : {4, 8}) {
    PromptLookupDrafter lookup(PromptLookupConfig{1, 4});
    RecordingDrafter recording(lookup);
    SpeculativeDecoder spec(*target, &recording, fixed_k(k));
    const std::vector<Token> got = generate(spec, prompt, greedy_params(), 1000);
    EXPECT_EQ(got, expected) << "K=" << k;
    EXPECT_EQ(prompt.size() + got.size(), static_cast<size_t>(spec.n_ctx()));
    int n_past_eos = 0;
    for (const auto& p : recording.proposals) {
      for (size_t i = 0; i + 1 < p.size(); ++i) n_past_eos += p[i] == kEos ? 1 : 0;
    }
    EXPECT_GT(n_past_eos, 0) << "no proposal ran past EOS (K=" << k << ")";
    std::printf("[measure] lookup past EOS, K=%d: %d proposals ran past EOS, acceptance %.3f\n", k, n_past_eos,
                spec.stats().acceptance_rate());
  }
}

// Exact law of the first n_new tokens after `prompt` under `sampling` (no drafting), by
// enumeration: sequences in base-n_vocab order.
std::vector<double> exact_sequence_law(Transformer& model, const std::vector<Token>& prompt,
                                       const SamplingParams& sampling, int n_new) {
  const int n_vocab = model.config().n_vocab;
  std::vector<double> law(1, 1.0);  // law of the sequences of the current length
  std::vector<std::vector<Token>> seqs(1);
  for (int step = 0; step < n_new; ++step) {
    std::vector<double> next_law;
    std::vector<std::vector<Token>> next_seqs;
    for (size_t s = 0; s < seqs.size(); ++s) {
      std::vector<Token> ctx(prompt);
      ctx.insert(ctx.end(), seqs[s].begin(), seqs[s].end());
      KvCache cache = model.new_cache();
      Batch batch;
      for (size_t i = 0; i < ctx.size(); ++i) {
        batch.add(ctx[i], static_cast<int32_t>(i), static_cast<int32_t>(i) - 1, 0, i + 1 == ctx.size());
      }
      Logits logits;
      KvCache* caches[] = {&cache};
      model.forward(batch, caches, logits);
      const SparseDist p = make_distribution(std::span<const float>(logits.row(0), static_cast<size_t>(n_vocab)),
                                             sampling, ctx);
      double total = 0.0;
      for (float x : p.probs) total += x;
      for (Token t = 0; t < n_vocab; ++t) {
        next_law.push_back(law[s] * p.prob(t) / total);
        next_seqs.push_back(seqs[s]);
        next_seqs.back().push_back(t);
      }
    }
    law.swap(next_law);
    seqs.swap(next_seqs);
  }
  return law;
}

// Pearson chi-square of counts against law (cells with expectation < 5 pooled); returns
// (statistic, degrees of freedom).
std::pair<double, int> chi_square(const std::vector<int64_t>& counts, const std::vector<double>& law, int64_t n) {
  double stat = 0.0, pooled_expected = 0.0;
  int64_t pooled_count = 0;
  int n_cells = 0;
  for (size_t i = 0; i < law.size(); ++i) {
    const double e = law[i] * double(n);
    if (e < 5.0) {
      pooled_expected += e;
      pooled_count += counts[i];
      if (e == 0.0 && counts[i] > 0) return {INFINITY, 1};  // an impossible sequence came out
      continue;
    }
    stat += (double(counts[i]) - e) * (double(counts[i]) - e) / e;
    ++n_cells;
  }
  if (pooled_expected > 0.0) {
    stat += (double(pooled_count) - pooled_expected) * (double(pooled_count) - pooled_expected) / pooled_expected;
    ++n_cells;
  }
  return {stat, n_cells - 1};
}

// Upper quantile of chi-square(df) at z standard deviations (Wilson-Hilferty).
double chi_square_quantile(int df, double z) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

TEST(NgramExactness, SamplingWithALookupDrafterKeepsTheTargetDistribution) {
  const auto& trio = testing::micro_trio();  // 8-token vocabulary: sequences can be enumerated
  auto target = testing::load_single_threaded(trio.target);
  // The model's own greedy continuation of `base`, then `base` again: the lookup proposes what
  // the model tends to say, so drafts are partly accepted and partly rejected.
  const std::vector<Token> base{1, 3, 4};
  std::vector<Token> prompt(base);
  SpeculativeDecoder plain(*target, nullptr);
  const std::vector<Token> continuation = generate(plain, base, greedy_params(), 8);
  prompt.insert(prompt.end(), continuation.begin(), continuation.end());
  prompt.insert(prompt.end(), base.begin(), base.end());
  SamplingParams sampling;
  sampling.temperature = 0.9f;
  sampling.top_k = 6;
  const int n_new = 3;
  const std::vector<double> law = exact_sequence_law(*target, prompt, sampling, n_new);
  PromptLookupDrafter lookup(PromptLookupConfig{1, 3});
  SpeculativeDecoder spec(*target, &lookup, fixed_k(2));
  const int64_t n_runs = 4000 / testing::sanitizer_slowdown();
  const uint64_t seed = testing::test_seed("ngram sampling losslessness");
  std::vector<int64_t> counts(law.size(), 0);
  for (int64_t run = 0; run < n_runs; ++run) {
    sampling.seed = seed + static_cast<uint64_t>(run);
    const std::vector<Token> out = generate(spec, prompt, sampling, n_new);
    ASSERT_EQ(out.size(), static_cast<size_t>(n_new));
    size_t index = 0;
    for (Token t : out) index = index * 8 + static_cast<size_t>(t);
    ++counts[index];
  }
  EXPECT_GT(spec.stats().n_drafted, n_runs) << "the lookup should draft in most steps";
  EXPECT_GT(spec.stats().n_accepted, n_runs / 10) << "too few accepted drafts to exercise acceptance";
  const auto [stat, df] = chi_square(counts, law, n_runs);
  const double limit = chi_square_quantile(df, 4.0);  // one-sided p ~ 3e-5
  std::printf("[measure] lookup sampling T=%.1f: chi-square %.1f on %d df (limit %.1f), acceptance %.3f\n",
              sampling.temperature, stat, df, limit, spec.stats().acceptance_rate());
  EXPECT_LT(stat, limit);
  // The statistic has power: the same counts against the law at another temperature fail.
  SamplingParams hotter = sampling;
  hotter.temperature = 1.5f;
  const auto [wrong_stat, wrong_df] = chi_square(counts, exact_sequence_law(*target, prompt, hotter, n_new), n_runs);
  EXPECT_GT(wrong_stat, chi_square_quantile(wrong_df, 4.0)) << "chi-square cannot tell T=0.9 from T=1.5";
}

}  // namespace
}  // namespace specdec

namespace specdec {
namespace {

// Token trees from the real model-free drafters (several continuations per node, deterministic
// children) under sampling: the first 3 tokens keep the target's exact distribution.
TEST(NgramExactness, SamplingWithModelFreeTreesKeepsTheTargetDistribution) {
  const auto& trio = testing::micro_trio();
  auto target = testing::load_single_threaded(trio.target);
  // A prompt with several different continuations of the same contexts, so trees branch.
  const std::vector<Token> prompt{1, 3, 4, 5, 6, 3, 4, 7, 2, 3, 4, 5, 7, 6, 3, 4};
  SamplingParams sampling;
  sampling.temperature = 1.0f;
  sampling.top_k = 0;
  const int n_new = 3;
  const std::vector<double> law = exact_sequence_law(*target, prompt, sampling, n_new);
  NgramConfig nc;
  nc.tree_width = 3;
  PromptLookupConfig lc{1, 3};
  lc.tree_width = 3;
  lc.tree_depth = 3;
  NgramDrafter ngram(nc);
  PromptLookupDrafter lookup(lc);
  const uint64_t seed = testing::test_seed("model-free tree sampling losslessness");
  for (Drafter* drafter : {static_cast<Drafter*>(&ngram), static_cast<Drafter*>(&lookup)}) {
    SpeculativeDecoder spec(*target, drafter, fixed_k(6));
    const int64_t n_runs = 4000 / testing::sanitizer_slowdown();
    std::vector<int64_t> counts(law.size(), 0);
    for (int64_t run = 0; run < n_runs; ++run) {
      sampling.seed = seed + static_cast<uint64_t>(run);
      const std::vector<Token> out = generate(spec, prompt, sampling, n_new);
      ASSERT_EQ(out.size(), static_cast<size_t>(n_new));
      size_t index = 0;
      for (Token t : out) index = index * 8 + static_cast<size_t>(t);
      ++counts[index];
    }
    const SpecStats& s = spec.stats();
    EXPECT_GT(s.n_tree_steps, n_runs / 4) << drafter->name() << ": the drafter should propose real trees";
    EXPECT_GT(s.n_accepted, n_runs / 10) << drafter->name();
    const auto [stat, df] = chi_square(counts, law, n_runs);
    const double limit = chi_square_quantile(df, 4.0);
    std::printf("[measure] %s sampling T=1: chi-square %.1f on %d df (limit %.1f), tree steps %lld, acceptance %.3f\n",
                drafter->name().c_str(), stat, df, limit, static_cast<long long>(s.n_tree_steps), s.acceptance_rate());
    EXPECT_LT(stat, limit) << drafter->name();
  }
}

}  // namespace
}  // namespace specdec
