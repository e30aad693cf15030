// tests/spec/synthetic.h — small helpers for the pure acceptance tests: random distributions
// over tiny vocabularies and a "synthetic language model" whose logits for any prefix are a
// fixed pseudo-random function of (seed, prefix), so exact sequence probabilities can be
// enumerated without a transformer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "specdec/rng.h"
#include "specdec/sampling.h"

namespace specdec::testing {

// Kinds of (p, q) pairs the one-step tests cover.
enum class PairKind { Random, Equal, DisjointSupports, QOneHotInside, QOneHotOutside, ZerosInP, ZerosInQ, POneHot, Close };

inline const char* pair_kind_name(PairKind k) {
  switch (k) {
    case PairKind::Random: return "random";
    case PairKind::Equal: return "q=p";
    case PairKind::DisjointSupports: return "disjoint";
    case PairKind::QOneHotInside: return "q one-hot in supp(p)";
    case PairKind::QOneHotOutside: return "q one-hot outside supp(p)";
    case PairKind::ZerosInP: return "zeros in p";
    case PairKind::ZerosInQ: return "zeros in q";
    case PairKind::POneHot: return "p one-hot";
    case PairKind::Close: return "q close to p";
  }
  return "?";
}

// Dense (n_vocab) probabilities -> SparseDist (zero entries dropped).
inline SparseDist to_sparse(const std::vector<double>& dense) {
  SparseDist d;
  for (size_t i = 0; i < dense.size(); ++i) {
    if (dense[i] > 0.0) {
      d.ids.push_back(static_cast<Token>(i));
      d.probs.push_back(static_cast<float>(dense[i]));
    }
  }
  return d;
}

// The float probabilities of `d` renormalised in double: the exact law sample() draws from.
inline std::vector<double> to_dense(const SparseDist& d, int n_vocab) {
  std::vector<double> dense(static_cast<size_t>(n_vocab), 0.0);
  double total = 0.0;
  for (float p : d.probs) total += p;
  for (size_t i = 0; i < d.ids.size(); ++i) dense[static_cast<size_t>(d.ids[i])] = d.probs[i] / total;
  return dense;
}

// Random probabilities over `mask` (1 = in the support), with uneven sizes.
inline std::vector<double> random_probs(Rng& rng, const std::vector<int>& mask) {
  std::vector<double> p(mask.size(), 0.0);
  double total = 0.0;
  for (size_t i = 0; i < mask.size(); ++i) {
    if (!mask[i]) continue;
    const double u = rng.uniform();
    p[i] = 0.05 + u * u * 3.0;
    total += p[i];
  }
  for (auto& x : p) x /= total;
  return p;
}

inline std::vector<int> full_mask(int n) { return std::vector<int>(static_cast<size_t>(n), 1); }

// A (p, q) pair of the given kind over n_vocab in [3, 8]; returns {p, q} dense.
inline std::pair<std::vector<double>, std::vector<double>> random_pair(Rng& rng, PairKind kind, int n_vocab) {
  const auto all = full_mask(n_vocab);
  std::vector<double> p, q;
  switch (kind) {
    case PairKind::Random:
      p = random_probs(rng, all);
      q = random_probs(rng, all);
      break;
    case PairKind::Equal:
      p = random_probs(rng, all);
      q = p;
      break;
    case PairKind::DisjointSupports: {
      std::vector<int> a(all.size(), 0), b(all.size(), 0);
      for (size_t i = 0; i < all.size(); ++i) (i % 2 ? a : b)[i] = 1;
      p = random_probs(rng, a);
      q = random_probs(rng, b);
      break;
    }
    case PairKind::QOneHotInside:
      p = random_probs(rng, all);
      q.assign(all.size(), 0.0);
      q[rng.below(all.size())] = 1.0;
      break;
    case PairKind::QOneHotOutside: {
      auto m = all;
      m[0] = 0;
      p = random_probs(rng, m);
      q.assign(all.size(), 0.0);
      q[0] = 1.0;
      break;
    }
    case PairKind::ZerosInP: {
      auto m = all;
      m[1] = m[static_cast<size_t>(n_vocab - 1)] = 0;
      p = random_probs(rng, m);
      q = random_probs(rng, all);
      break;
    }
    case PairKind::ZerosInQ: {
      auto m = all;
      m[0] = m[2] = 0;
      p = random_probs(rng, all);
      q = random_probs(rng, m);
      break;
    }
    case PairKind::POneHot:
      p.assign(all.size(), 0.0);
      p[rng.below(all.size())] = 1.0;
      q = random_probs(rng, all);
      break;
    case PairKind::Close: {
      p = random_probs(rng, all);
      q = p;
      double total = 0.0;
      for (auto& x : q) total += (x *= 1.0 + 0.3 * (rng.uniform() - 0.5));
      for (auto& x : q) x /= total;
      break;
    }
  }
  return {p, q};
}

// Logits of a synthetic model: a pseudo-random function of (seed, prefix).
inline std::vector<float> synthetic_logits(uint64_t seed, const std::vector<Token>& prefix, int n_vocab, float scale) {
  uint64_t h = seed ^ 0x9e3779b97f4a7c15ULL;
  for (Token t : prefix) h = (h ^ static_cast<uint64_t>(t + 1)) * 0x100000001b3ULL + 0x632be59bd9b4e019ULL;
  Rng rng(h);
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  for (auto& l : logits) l = static_cast<float>((rng.uniform() * 2.0 - 1.0) * scale);
  return logits;
}

}  // namespace specdec::testing
