// tests/spec/exact_sequences.h — the exact distribution of the first 3 generated tokens of a
// target over an 8-token vocabulary (all 512 sequences enumerated), and the sampling settings
// the chi-square families use. Shared by the draft-model and the self-speculation tests.
#pragma once

#include <vector>

#include "spec/synthetic.h"
#include "specdec/model.h"
#include "specdec/sampling.h"

namespace specdec::testing {

constexpr int kMicroVocab = 8;
constexpr int kThreeTokenCells = kMicroVocab * kMicroVocab * kMicroVocab;

inline SamplingParams plain_t1() {
  SamplingParams s;
  s.temperature = 1.0f;
  s.top_k = 0;
  s.top_p = 1.0f;
  s.min_p = 0.0f;
  return s;
}

inline SamplingParams truncated_t07() {
  SamplingParams s;
  s.temperature = 0.7f;
  s.top_k = 5;
  s.top_p = 0.9f;
  s.min_p = 0.0f;
  return s;
}

// P(t1 t2 t3 | prompt) under the target, by enumeration: (512) indexed t1 * 64 + t2 * 8 + t3.
inline std::vector<double> exact_first_three(Transformer& target, const SamplingParams& sampling,
                                             const std::vector<Token>& prompt) {
  constexpr int V = kMicroVocab;
  std::vector<double> probs(kThreeTokenCells, 0.0);
  auto next_dist = [&](const std::vector<Token>& seq) {
    KvCache cache = target.new_cache();
    Batch batch;
    for (size_t i = 0; i < seq.size(); ++i) {
      batch.add(seq[i], static_cast<int32_t>(i), static_cast<int32_t>(i) - 1, 0, i + 1 == seq.size());
    }
    Logits logits;
    KvCache* caches[] = {&cache};
    target.forward(batch, caches, logits);
    const SparseDist d = make_distribution(std::span<const float>(logits.row(0), V), sampling, seq);
    return to_dense(d, V);
  };
  const auto p1 = next_dist(prompt);
  for (int a = 0; a < V; ++a) {
    if (p1[a] == 0.0) continue;
    auto s1 = prompt;
    s1.push_back(a);
    const auto p2 = next_dist(s1);
    for (int b = 0; b < V; ++b) {
      if (p2[b] == 0.0) continue;
      auto s2 = s1;
      s2.push_back(b);
      const auto p3 = next_dist(s2);
      for (int c = 0; c < V; ++c) probs[static_cast<size_t>(a * 64 + b * 8 + c)] = p1[a] * p2[b] * p3[c];
    }
  }
  return probs;
}

}  // namespace specdec::testing
