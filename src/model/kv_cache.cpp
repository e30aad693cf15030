// model/kv_cache.cpp — per-sequence K/V storage with O(1) truncate and tree compaction.
#include <cstring>
#include <string>

#include "specdec/error.h"
#include "specdec/model.h"

namespace specdec {

KvCache::KvCache(const ModelConfig& config, int n_ctx)
    : n_layers_(config.n_layers), n_ctx_(n_ctx), kv_dim_(config.kv_dim()) {
  if (n_ctx <= 0) throw Error("KV cache: context length " + std::to_string(n_ctx) + " must be positive");
  if (n_layers_ <= 0 || kv_dim_ <= 0) {
    throw Error("KV cache: invalid model shape (n_layers " + std::to_string(n_layers_) + ", kv_dim " +
                std::to_string(kv_dim_) + ")");
  }
  const size_t n_floats = static_cast<size_t>(n_layers_) * static_cast<size_t>(n_ctx_) * static_cast<size_t>(kv_dim_);
  k_.assign(n_floats, 0.0f);  // (n_layers, n_ctx, kv_dim)
  v_.assign(n_floats, 0.0f);  // (n_layers, n_ctx, kv_dim)
}

void KvCache::truncate(int n) {
  if (n < 0 || n > n_used_) {
    throw Error("KV cache: truncate(" + std::to_string(n) + ") outside [0, " + std::to_string(n_used_) + "]");
  }
  n_used_ = n;
}

void KvCache::keep_rows(int first, std::span<const int> rows) {
  if (first < 0 || first > n_used_) {
    throw Error("KV cache: keep_rows first " + std::to_string(first) + " outside [0, " +
                std::to_string(n_used_) + "]");
  }
  const int n_appended = n_used_ - first;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= n_appended || (i > 0 && rows[i] <= rows[i - 1])) {
      throw Error("KV cache: keep_rows row " + std::to_string(rows[i]) + " (index " + std::to_string(i) +
                  ") must be strictly increasing and < " + std::to_string(n_appended));
    }
  }
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(kv_dim_);
  for (int layer = 0; layer < n_layers_; ++layer) {
    for (size_t i = 0; i < rows.size(); ++i) {
      const int src = first + rows[i];
      const int dst = first + static_cast<int>(i);
      if (src == dst) continue;
      // dst < src always (rows strictly increasing), and no later source is overwritten.
      std::memcpy(k(layer, dst), k(layer, src), row_bytes);
      std::memcpy(v(layer, dst), v(layer, src), row_bytes);
    }
  }
  n_used_ = first + static_cast<int>(rows.size());
}

int KvCache::append(int n) {
  if (n < 0 || n > n_ctx_ - n_used_) {
    throw Error("KV cache: " + std::to_string(n) + " more positions do not fit in the context of " +
                std::to_string(n_ctx_) + " (" + std::to_string(n_used_) + " used)");
  }
  const int first = n_used_;
  n_used_ += n;
  return first;
}

}  // namespace specdec
