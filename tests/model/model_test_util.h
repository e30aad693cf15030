// tests/model/model_test_util.h — helpers shared by the model tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "specdec/model.h"

namespace specdec::testing {

// Decodes `tokens` one at a time from position 0 (into *cache_out after truncating it, else a
// fresh cache); returns the logits (n, n_vocab).
std::vector<float> decode_one_at_a_time(Transformer& model, const std::vector<Token>& tokens,
                                        KvCache* cache_out = nullptr);

// ||a - b|| / ||b|| over all values.
double relative_rms(const std::vector<float>& a, const std::vector<float>& b);

int argmax(const float* x, int n);

// The 16-token sequence llama.cpp's reference logits were computed on.
const std::vector<Token>& reference_tokens();

}  // namespace specdec::testing
