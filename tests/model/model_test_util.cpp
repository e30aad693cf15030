#include "model/model_test_util.h"

#include <cmath>

namespace specdec::testing {

std::vector<float> decode_one_at_a_time(Transformer& model, const std::vector<Token>& tokens,
                                        KvCache* cache_out) {
  KvCache local = model.new_cache();
  KvCache& cache = cache_out ? *cache_out : local;
  cache.truncate(0);
  const int n_vocab = model.config().n_vocab;
  std::vector<float> logits(tokens.size() * static_cast<size_t>(n_vocab));  // (n, n_vocab)
  Batch batch;
  Logits out;
  KvCache* caches[] = {&cache};
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch.clear();
    batch.add(tokens[i], static_cast<int32_t>(i), -1, 0, true);
    model.forward(batch, caches, out);
    std::copy(out.row(0), out.row(0) + n_vocab, logits.begin() + static_cast<std::ptrdiff_t>(i * n_vocab));
  }
  return logits;
}

double relative_rms(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    diff += d * d;
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

int argmax(const float* x, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) if (x[i] > x[best]) best = i;
  return best;
}

const std::vector<Token>& reference_tokens() {
  static const std::vector<Token> tokens = {1, 403, 407, 261, 378, 11, 280, 300, 17, 42, 511, 7, 99, 250, 3, 128};
  return tokens;
}

}  // namespace specdec::testing
