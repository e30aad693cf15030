// tests/engine/engine_requests.h — engine options and requests shared by the engine tests.
#pragma once

#include <string>

#include "specdec/engine.h"

namespace specdec::testing {

// A prompt whose continuation repeats it, so lookup drafts get accepted in long runs.
inline constexpr const char* kRepetitive =
    "Lily saw a big red ball. She wanted to play with the ball. Lily saw a big red ball. She wanted to";

inline EngineOptions options_for(const std::string& model, const char* method, int n_threads) {
  EngineOptions o;
  o.model_path = model;
  o.method = parse_spec_method(method);
  o.n_threads = n_threads;
  return o;
}

inline GenerateRequest greedy(const std::string& prompt, int n) {
  GenerateRequest r;
  r.prompt = prompt;
  r.max_tokens = n;
  r.sampling.temperature = 0.0f;
  return r;
}

}  // namespace specdec::testing
