// sampling/distribution.cpp — the pure logits -> distribution transform (see sampling.h).
//
// Every step works on a list of candidates (id, logit) so that truncation is cheap on large
// vocabularies: after top-k only k candidates remain. Ties in every ordering are broken by
// the lower id, so the result is a deterministic function of (logits, params, history).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>

#include "specdec/error.h"
#include "specdec/rng.h"
#include "specdec/sampling.h"

namespace specdec {

namespace {

struct Candidate {
  Token id;
  float logit;
};

// Higher logit first, then lower id: the order used by top-k, top-p and argmax.
bool before(const Candidate& a, const Candidate& b) {
  if (a.logit != b.logit) return a.logit > b.logit;
  return a.id < b.id;
}

// Applies logit bias and the history penalties to `logits` in place.
// history: only the last params.repeat_last_n tokens are looked at.
void apply_bias_and_penalties(std::vector<float>& logits, const SamplingParams& params,
                              std::span<const Token> history) {
  const int n_vocab = static_cast<int>(logits.size());
  for (const auto& [id, bias] : params.logit_bias) {
    if (id < 0 || id >= n_vocab) {
      throw Error("logit_bias token id " + std::to_string(id) + " is outside the vocabulary of " +
                  std::to_string(n_vocab) + " tokens");
    }
    logits[static_cast<size_t>(id)] += bias;
  }
  const bool penalties = params.repeat_penalty != 1.0f || params.presence_penalty != 0.0f ||
                         params.frequency_penalty != 0.0f;
  if (!penalties || params.repeat_last_n == 0 || history.empty()) return;
  size_t n_look = history.size();
  if (params.repeat_last_n > 0) n_look = std::min(n_look, static_cast<size_t>(params.repeat_last_n));
  std::unordered_map<Token, int> counts;
  for (size_t i = history.size() - n_look; i < history.size(); ++i) ++counts[history[i]];
  for (const auto& [id, count] : counts) {
    if (id < 0 || id >= n_vocab) continue;  // e.g. a draft vocabulary's id the target lacks
    float& logit = logits[static_cast<size_t>(id)];
    if (params.repeat_penalty != 1.0f) {
      logit = logit > 0.0f ? logit / params.repeat_penalty : logit * params.repeat_penalty;
    }
    logit -= static_cast<float>(count) * params.frequency_penalty + params.presence_penalty;
  }
}

}  // namespace

float SparseDist::prob(Token id) const {
  auto it = std::lower_bound(ids.begin(), ids.end(), id);
  if (it == ids.end() || *it != id) return 0.0f;
  return probs[static_cast<size_t>(it - ids.begin())];
}

SparseDist SparseDist::one_hot(Token id) {
  SparseDist dist;
  dist.ids.push_back(id);
  dist.probs.push_back(1.0f);
  return dist;
}

Token argmax(std::span<const float> logits) {
  SPECDEC_CHECK(!logits.empty(), "argmax of an empty logits row");
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = i;  // strict: ties keep the lowest id
  }
  return static_cast<Token>(best);
}

SparseDist make_distribution(std::span<const float> logits_in, const SamplingParams& params,
                             std::span<const Token> history) {
  if (logits_in.empty()) throw Error("make_distribution: empty logits row");
  std::vector<float> logits(logits_in.begin(), logits_in.end());  // (n_vocab)
  apply_bias_and_penalties(logits, params, history);

  const float neg_inf = -std::numeric_limits<float>::infinity();
  if (params.greedy()) {
    const Token best = argmax(logits);
    if (!(logits[static_cast<size_t>(best)] > neg_inf)) {
      throw Error("make_distribution: every token has logit -inf (all banned by logit_bias?)");
    }
    return SparseDist::one_hot(best);
  }

  // Candidates with a finite (or +inf) logit, scaled by the temperature.
  std::vector<Candidate> cands;  // (n_candidates)
  cands.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    if (std::isnan(l)) throw Error("make_distribution: logit of token " + std::to_string(i) + " is NaN");
    if (l > neg_inf) cands.push_back({static_cast<Token>(i), l / params.temperature});
  }
  if (cands.empty()) throw Error("make_distribution: every token has logit -inf (all banned by logit_bias?)");

  // top-k: keep the k best, sorted best first.
  const bool truncating = params.top_p < 1.0f || params.min_p > 0.0f;
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < cands.size()) {
    std::nth_element(cands.begin(), cands.begin() + params.top_k, cands.end(), before);
    cands.resize(static_cast<size_t>(params.top_k));
    std::sort(cands.begin(), cands.end(), before);
  } else if (truncating) {
    std::sort(cands.begin(), cands.end(), before);
  }

  // Softmax over the candidates (double accumulation, max subtracted).
  float max_logit = cands[0].logit;
  for (const auto& c : cands) max_logit = std::max(max_logit, c.logit);
  std::vector<double> weights(cands.size());  // (n_candidates) unnormalised probabilities
  double total = 0.0;
  for (size_t i = 0; i < cands.size(); ++i) {
    // +inf logits (a bias of +inf) share the mass equally.
    const double x = std::isinf(max_logit) ? (cands[i].logit == max_logit ? 0.0 : -INFINITY)
                                           : static_cast<double>(cands[i].logit) - max_logit;
    weights[i] = std::exp(x);
    total += weights[i];
  }
  for (auto& w : weights) w /= total;

  size_t n_keep = cands.size();
  if (params.top_p < 1.0f) {  // candidates are sorted best first here
    double cumulative = 0.0;
    for (size_t i = 0; i < cands.size(); ++i) {
      cumulative += weights[i];
      if (cumulative >= params.top_p) {
        n_keep = i + 1;
        break;
      }
    }
  }
  if (params.min_p > 0.0f) {  // sorted: weights[0] is the largest
    const double threshold = static_cast<double>(params.min_p) * weights[0];
    size_t n_min_p = 1;
    while (n_min_p < n_keep && weights[n_min_p] >= threshold) ++n_min_p;
    n_keep = n_min_p;
  }

  // Renormalise over the kept candidates and order by id.
  std::vector<size_t> order(n_keep);  // (n_keep) candidate indices by ascending id
  double kept = 0.0;
  for (size_t i = 0; i < n_keep; ++i) {
    order[i] = i;
    kept += weights[i];
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cands[a].id < cands[b].id; });
  SparseDist dist;
  dist.ids.reserve(n_keep);
  dist.probs.reserve(n_keep);
  for (size_t i : order) {
    const double prob = weights[i] / kept;
    if (prob <= 0.0) continue;  // underflow: not in the support
    dist.ids.push_back(cands[i].id);
    dist.probs.push_back(static_cast<float>(prob));
  }
  return dist;
}

Token sample(const SparseDist& dist, Rng& rng) {
  SPECDEC_CHECK(!dist.empty(), "sample from an empty distribution");
  // Scale the uniform by the stored total so float rounding of the probabilities never
  // shifts mass onto the last id.
  double total = 0.0;
  for (float prob : dist.probs) total += prob;
  const double target = rng.uniform() * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < dist.ids.size(); ++i) {
    cumulative += dist.probs[i];
    if (target < cumulative) return dist.ids[i];
  }
  // Only reachable through rounding: the last id with non-zero probability.
  for (size_t i = dist.ids.size(); i-- > 0;) {
    if (dist.probs[i] > 0.0f) return dist.ids[i];
  }
  SPECDEC_CHECK(false, "sample: distribution has no positive probability");
  return -1;
}

}  // namespace specdec
