// tests/spec/spec_models.h — target/draft model pairs and generation helpers for the
// speculative decoding tests (tiny random models made with the project's GGUF writer).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/testing.h"
#include "common/tiny_model.h"
#include "specdec/drafter.h"
#include "specdec/model.h"
#include "specdec/speculative.h"
#include "specdec/make_model.h"

namespace specdec::testing {

inline std::unique_ptr<Transformer> load_single_threaded(const std::string& path, DType kv_type = DType::F32) {
  ModelOptions options;
  options.n_threads = 1;
  options.kv_type = kv_type;
  return Transformer::load(path, options);
}

// A target, a noisy copy of it (partly right) and an unrelated model (wrong), same vocabulary.
struct ModelTrio {
  std::string target, noisy, unrelated;
};

inline const ModelTrio& tiny_trio() {
  static const ModelTrio trio = [] {
    TinyModelSpec spec;
    spec.n_vocab = 300;
    spec.n_embd = 64;
    spec.n_layers = 2;
    spec.n_ff = 96;
    spec.n_ctx = 128;
    spec.seed = 11;
    spec.weight_scale = 2.0f;  // peaky enough that greedy decoding is not a flat coin toss
    ModelTrio t;
    t.target = make_random_llama("spec_target.gguf", spec);
    t.noisy = temp_dir() + "/spec_noisy.gguf";
    make_noisy_copy(t.target, t.noisy, 0.05f, 5);
    spec.seed = 12;
    t.unrelated = make_random_llama("spec_unrelated.gguf", spec);
    return t;
  }();
  return trio;
}

// Tiny models over an 8-token vocabulary, for exact enumeration of sequence probabilities.
inline const ModelTrio& micro_trio() {
  static const ModelTrio trio = [] {
    TinyModelSpec spec;
    spec.n_vocab = 8;
    spec.n_embd = 32;
    spec.n_layers = 1;
    spec.n_heads = 2;
    spec.n_kv_heads = 1;
    spec.n_ff = 32;
    spec.n_ctx = 32;
    spec.seed = 21;
    spec.weight_scale = 1.0f;
    ModelTrio t;
    t.target = make_random_llama("spec_micro_target.gguf", spec);
    t.noisy = temp_dir() + "/spec_micro_noisy.gguf";
    make_noisy_copy(t.target, t.noisy, 0.8f, 7);
    spec.seed = 22;
    t.unrelated = make_random_llama("spec_micro_unrelated.gguf", spec);
    return t;
  }();
  return trio;
}

// Forwards every call to `inner` (a decorator, not a stand-in): tests derive from it to record
// proposals or verdicts, or to hide the drafting time.
class ForwardingDrafter : public Drafter {
 public:
  explicit ForwardingDrafter(Drafter& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  void begin(std::span<const Token> prompt) override { inner_.begin(prompt); }
  Draft propose(std::span<const Token> context, int n_max, const SamplingParams& sampling) override {
    return inner_.propose(context, n_max, sampling);
  }
  void accept(const Draft& draft, const Verdict& verdict) override { inner_.accept(draft, verdict); }
  void rollback(int n_tokens) override { inner_.rollback(n_tokens); }
  void set_p_min(float p_min) override { inner_.set_p_min(p_min); }
  bool wants_features() const override { return inner_.wants_features(); }
  void set_features(std::span<const float> features, int n_embd) override { inner_.set_features(features, n_embd); }
  void catch_up(std::span<const Token> prompt) override { inner_.catch_up(prompt); }
  double draft_seconds() const override { return inner_.draft_seconds(); }

 private:
  Drafter& inner_;
};

// Reports no drafting time: the adaptive controller then sees a free drafter (c_draft = 0),
// takes shadow drafts at plain steps and drafts once they agree. With tiny models the draft
// costs as much as the target, so without this the adaptive rule would (correctly) settle at
// K = 0 and the adaptive tests would exercise plain decoding only.
class ClockFreeDrafter : public ForwardingDrafter {
 public:
  using ForwardingDrafter::ForwardingDrafter;
  double draft_seconds() const override { return 0.0; }
};

inline SamplingParams greedy_params() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}
inline const SamplingParams kGreedy = greedy_params();

// Plain sampling from the model's distribution: temperature 1, no truncation.
inline SamplingParams t1_params(uint64_t seed) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

// Generates up to n_new tokens after `prompt` with `decoder`; returns the generated tokens.
inline std::vector<Token> generate(SpeculativeDecoder& decoder, const std::vector<Token>& prompt,
                                   const SamplingParams& sampling, int n_new) {
  decoder.begin(prompt, sampling);
  std::vector<Token> out;
  while (static_cast<int>(out.size()) < n_new && decoder.remaining() > 0) {
    const auto emitted = decoder.step(n_new - static_cast<int>(out.size()));
    out.insert(out.end(), emitted.begin(), emitted.end());
  }
  return out;
}

// Bitwise comparison of a cache's first tokens.size() - 1 ... slots with a fresh prefill of
// `tokens` (all of them) on the same model.
inline ::testing::AssertionResult cache_equals_fresh(Transformer& model, const KvCache& cache,
                                                     const std::vector<Token>& tokens) {
  if (cache.size() != static_cast<int>(tokens.size())) {
    return ::testing::AssertionFailure() << "cache holds " << cache.size() << " slots, expected " << tokens.size();
  }
  KvCache fresh = model.new_cache(cache.capacity());
  if (!tokens.empty()) {
    Batch batch;
    for (size_t i = 0; i < tokens.size(); ++i) {
      batch.add(tokens[i], static_cast<int32_t>(i), static_cast<int32_t>(i) - 1, 0, false);
    }
    Logits logits;
    KvCache* caches[] = {&fresh};
    model.forward(batch, caches, logits);
  }
  if (cache.type() != fresh.type()) return ::testing::AssertionFailure() << "cache types differ";
  for (int s = 0; s < cache.size(); ++s) {
    if (!cache.same_slot(s, fresh, s)) return ::testing::AssertionFailure() << "K/V differ at slot " << s;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace specdec::testing
