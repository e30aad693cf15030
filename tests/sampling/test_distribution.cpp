// make_distribution, argmax, sample: against a dense reference written independently here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "common/testing.h"
#include "sampling/chi_square.h"
#include "specdec/error.h"
#include "specdec/rng.h"
#include "specdec/sampling.h"

namespace specdec {
namespace {

// Dense reference: returns (n_vocab) probabilities, following the documented order of
// operations with the simplest possible code (full sorts, double everywhere).
std::vector<double> reference_distribution(std::vector<float> logits, const SamplingParams& params,
                                           const std::vector<Token>& history) {
  const size_t n = logits.size();
  for (auto [id, bias] : params.logit_bias) logits[static_cast<size_t>(id)] += bias;
  size_t start = 0;
  if (params.repeat_last_n >= 0 && history.size() > static_cast<size_t>(params.repeat_last_n)) {
    start = history.size() - static_cast<size_t>(params.repeat_last_n);
  }
  std::vector<int> count(n, 0);
  for (size_t i = start; i < history.size(); ++i) count[static_cast<size_t>(history[i])]++;
  for (size_t i = 0; i < n; ++i) {
    if (count[i] == 0) continue;
    if (logits[i] > 0) logits[i] /= params.repeat_penalty; else logits[i] *= params.repeat_penalty;
    logits[i] -= count[i] * params.frequency_penalty + params.presence_penalty;
  }
  std::vector<double> out(n, 0.0);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  if (params.temperature <= 0) {
    out[order[0]] = 1.0;
    return out;
  }
  size_t n_keep = n;
  if (params.top_k > 0) n_keep = std::min(n_keep, static_cast<size_t>(params.top_k));
  std::vector<double> w(n_keep);
  double sum = 0;
  for (size_t i = 0; i < n_keep; ++i) {
    w[i] = std::exp((static_cast<double>(logits[order[i]] / params.temperature)) -
                    static_cast<double>(logits[order[0]] / params.temperature));
    sum += w[i];
  }
  for (auto& x : w) x /= sum;
  if (params.top_p < 1) {
    double c = 0;
    for (size_t i = 0; i < n_keep; ++i) {
      c += w[i];
      if (c >= params.top_p) { n_keep = i + 1; break; }
    }
  }
  if (params.min_p > 0) {
    size_t k = 1;
    while (k < n_keep && w[k] >= params.min_p * w[0]) ++k;
    n_keep = k;
  }
  double kept = 0;
  for (size_t i = 0; i < n_keep; ++i) kept += w[i];
  for (size_t i = 0; i < n_keep; ++i) out[order[i]] = w[i] / kept;
  return out;
}

std::vector<float> random_logits(Rng& rng, int n_vocab, float scale) {
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  for (auto& l : logits) l = static_cast<float>((rng.uniform() * 2.0 - 1.0) * scale);
  // A few exact ties, which every ordering must break by the lower id.
  if (n_vocab > 4) logits[3] = logits[1];
  return logits;
}

TEST(Distribution, MatchesDenseReferenceOnRandomParams) {
  Rng rng(testing::test_seed("Distribution.MatchesDenseReferenceOnRandomParams"));
  for (int trial = 0; trial < 300; ++trial) {
    const int n_vocab = 1 + static_cast<int>(rng.below(60));
    SamplingParams params;
    params.temperature = rng.uniform() < 0.1 ? 0.0f : static_cast<float>(0.2 + rng.uniform() * 1.5);
    params.top_k = rng.uniform() < 0.3 ? 0 : static_cast<int>(1 + rng.below(20));
    params.top_p = rng.uniform() < 0.3 ? 1.0f : static_cast<float>(0.3 + 0.7 * rng.uniform());
    params.min_p = rng.uniform() < 0.3 ? 0.0f : static_cast<float>(0.2 * rng.uniform());
    params.repeat_penalty = rng.uniform() < 0.5 ? 1.0f : static_cast<float>(1.0 + rng.uniform());
    params.presence_penalty = rng.uniform() < 0.5 ? 0.0f : static_cast<float>(rng.uniform());
    params.frequency_penalty = rng.uniform() < 0.5 ? 0.0f : static_cast<float>(rng.uniform());
    params.repeat_last_n = static_cast<int>(rng.below(12)) - 1;  // -1: whole history
    std::vector<Token> history(rng.below(20));
    for (auto& t : history) t = static_cast<Token>(rng.below(static_cast<uint64_t>(n_vocab)));
    if (rng.uniform() < 0.3) params.logit_bias.push_back({static_cast<Token>(rng.below(n_vocab)), 2.5f});

    const auto logits = random_logits(rng, n_vocab, 4.0f);
    const auto dist = make_distribution(logits, params, history);
    const auto ref = reference_distribution(logits, params, history);
    ASSERT_TRUE(std::is_sorted(dist.ids.begin(), dist.ids.end())) << "trial " << trial;
    double total = 0.0;
    for (float p : dist.probs) total += p;
    EXPECT_NEAR(total, 1.0, 1e-5) << "trial " << trial;
    for (int id = 0; id < n_vocab; ++id) {
      ASSERT_NEAR(dist.prob(id), ref[static_cast<size_t>(id)], 2e-6)
          << "trial " << trial << " id " << id << " n_vocab " << n_vocab << " T " << params.temperature
          << " top_k " << params.top_k << " top_p " << params.top_p << " min_p " << params.min_p;
    }
  }
}

TEST(Distribution, GreedyIsOneHotAtLowestArgmax) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  SamplingParams params;
  params.temperature = 0.0f;
  const auto dist = make_distribution(logits, params, {});
  ASSERT_EQ(dist.ids, std::vector<Token>{1});
  EXPECT_EQ(dist.probs[0], 1.0f);
  EXPECT_EQ(argmax(logits), 1);
}

TEST(Distribution, PenaltiesFollowLlamaCppSemantics) {
  const std::vector<float> logits = {2.0f, -2.0f, 1.0f};
  SamplingParams params;
  params.temperature = 0.0f;
  params.repeat_penalty = 4.0f;
  // token 0: 2 / 4 = 0.5 < 1 -> token 2 wins; token 1 multiplied: -8.
  const std::vector<Token> history = {0, 1};
  EXPECT_EQ(make_distribution(logits, params, history).ids[0], 2);
  // Outside the window of repeat_last_n = 1 only token 1 is penalised: token 0 wins again.
  params.repeat_last_n = 1;
  EXPECT_EQ(make_distribution(logits, params, history).ids[0], 0);
  // Frequency penalty scales with the count, presence does not.
  SamplingParams freq;
  freq.temperature = 0.0f;
  freq.frequency_penalty = 0.6f;
  const std::vector<Token> twice = {0, 0};
  EXPECT_EQ(make_distribution(logits, freq, twice).ids[0], 2);  // 2 - 1.2 = 0.8 < 1
  SamplingParams presence;
  presence.temperature = 0.0f;
  presence.presence_penalty = 0.6f;
  EXPECT_EQ(make_distribution(logits, presence, twice).ids[0], 0);  // 2 - 0.6 = 1.4 > 1
}

TEST(Distribution, LogitBiasBansAndRejectsBadIds) {
  const std::vector<float> logits = {3.0f, 1.0f, 0.0f};
  SamplingParams params;
  params.top_k = 0;
  params.top_p = 1.0f;
  params.min_p = 0.0f;
  params.logit_bias = {{0, -std::numeric_limits<float>::infinity()}};
  const auto dist = make_distribution(logits, params, {});
  EXPECT_EQ(dist.prob(0), 0.0f);
  EXPECT_EQ(dist.ids, (std::vector<Token>{1, 2}));
  params.logit_bias = {{7, 1.0f}};
  try {
    make_distribution(logits, params, {});
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find('7'), std::string::npos) << e.what();
  }
  params.logit_bias = {{0, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}};
  EXPECT_THROW(make_distribution(logits, params, {}), Error);
}

TEST(Distribution, TopKTiesKeepLowerIds) {
  const std::vector<float> logits = {1.0f, 5.0f, 1.0f, 1.0f};
  SamplingParams params;
  params.top_k = 2;
  params.top_p = 1.0f;
  params.min_p = 0.0f;
  EXPECT_EQ(make_distribution(logits, params, {}).ids, (std::vector<Token>{0, 1}));
}

TEST(Sample, MatchesDistributionByChiSquare) {
  Rng rng(testing::test_seed("Sample.MatchesDistributionByChiSquare"));
  SparseDist dist;
  dist.ids = {2, 5, 6, 9};
  dist.probs = {0.1f, 0.6f, 0.05f, 0.25f};
  const int n = 40000 / testing::sanitizer_slowdown();
  std::vector<int64_t> counts(4, 0);
  for (int i = 0; i < n; ++i) {
    const Token t = sample(dist, rng);
    auto it = std::find(dist.ids.begin(), dist.ids.end(), t);
    ASSERT_NE(it, dist.ids.end()) << "sampled id outside the support: " << t;
    ++counts[static_cast<size_t>(it - dist.ids.begin())];
  }
  const auto result = testing::chi_square_test(counts, {0.1, 0.6, 0.05, 0.25});
  EXPECT_GT(result.p_value, 1e-4) << result.detail;
}

TEST(Sample, SameSeedSameDraws) {
  SparseDist dist;
  dist.ids = {0, 1, 2};
  dist.probs = {0.3f, 0.3f, 0.4f};
  Rng a(42), b(42);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(sample(dist, a), sample(dist, b));
}

TEST(Sample, NeverReturnsZeroProbabilityIds) {
  SparseDist dist;
  dist.ids = {0, 1, 2};
  dist.probs = {0.5f, 0.5f, 0.0f};
  Rng rng(7);
  for (int i = 0; i < 2000; ++i) ASSERT_NE(sample(dist, rng), 2);
}

TEST(ChiSquare, KnownQuantiles) {
  EXPECT_NEAR(testing::chi_square_p_value(3.841458820694124, 1), 0.05, 1e-9);
  EXPECT_NEAR(testing::chi_square_p_value(18.307038053275146, 10), 0.05, 1e-9);
  EXPECT_NEAR(testing::chi_square_p_value(0.10258658877510107, 2), 0.95, 1e-9);
  EXPECT_NEAR(testing::chi_square_p_value(149.44918, 100), 0.001, 1e-6);
}

TEST(ChiSquare, RejectsAWrongDistribution) {
  std::vector<int64_t> counts = {5200, 4800};
  EXPECT_LT(testing::chi_square_test(counts, {0.45, 0.55}).p_value, 1e-6);
  EXPECT_GT(testing::chi_square_test(counts, {0.52, 0.48}).p_value, 0.5);
  std::vector<int64_t> impossible = {10, 1};
  EXPECT_EQ(testing::chi_square_test(impossible, {1.0, 0.0}).p_value, 0.0);
}

}  // namespace
}  // namespace specdec
