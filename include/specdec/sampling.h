// specdec/sampling.h — logits -> the distribution we sample from, and sampling.
//
// make_distribution is a PURE function of (logits, params, history): speculation applies the
// very same transform to the target's rows (p) and the draft's rows (q). Order of operations
// (as llama.cpp's default chain): logit bias, repetition/presence/frequency penalties over
// `history`, then temperature, top-k, softmax, top-p, min-p, renormalise.
// temperature == 0 means greedy: the result is one-hot at the argmax (ties -> lowest id).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace specdec {

using Token = int32_t;
class Rng;

struct SamplingParams {
  float temperature = 0.8f;
  int top_k = 40;             // <= 0: off
  float top_p = 0.95f;        // >= 1: off
  float min_p = 0.05f;        // <= 0: off
  float repeat_penalty = 1.0f;   // 1: off (llama.cpp semantics: divide positive logits, multiply negative)
  int repeat_last_n = 64;        // how much of history the penalties look at
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<std::pair<Token, float>> logit_bias;
  uint64_t seed = 0xC0FFEE;
  bool greedy() const { return temperature <= 0.0f; }
};

// Sparse probability distribution: the support left after truncation, ids ascending.
struct SparseDist {
  std::vector<Token> ids;     // (n_support)
  std::vector<float> probs;   // (n_support) sums to 1 (within rounding)
  bool empty() const { return ids.empty(); }
  float prob(Token id) const; // 0 when not in the support (binary search)
  static SparseDist one_hot(Token id);
};

// The pure transform. history = tokens before this position (prompt + generated + earlier
// draft tokens of the same verify chain), used by the penalties only.
SparseDist make_distribution(std::span<const float> logits, const SamplingParams& params,
                             std::span<const Token> history);

Token argmax(std::span<const float> logits);   // ties -> lowest id
// Draws from dist with one rng.uniform() (inverse CDF over ids ascending).
Token sample(const SparseDist& dist, Rng& rng);

}  // namespace specdec
