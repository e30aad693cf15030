// model/batch.cpp — Batch helpers and the validation/plan of a forward pass.
#include "model/batch_plan.h"

#include <algorithm>
#include <span>
#include <string>

#include "specdec/error.h"

namespace specdec {

void Batch::clear() {
  tokens.clear();
  positions.clear();
  parent.clear();
  seq.clear();
  want_logits.clear();
  want_features.clear();
  visible_prefix.clear();
  cache_ancestor_begin.clear();
  cache_ancestors.clear();
}

void Batch::add(Token token, int32_t position, int32_t parent_row, int32_t seq_index, bool logits, bool features) {
  if (features && want_features.size() < tokens.size()) want_features.resize(tokens.size(), 0);
  if (features || !want_features.empty()) want_features.push_back(features ? 1 : 0);
  tokens.push_back(token);
  positions.push_back(position);
  parent.push_back(parent_row);
  seq.push_back(seq_index);
  want_logits.push_back(logits ? 1 : 0);
  if (!cache_ancestor_begin.empty()) {
    visible_prefix.push_back(-1);
    cache_ancestor_begin.push_back(cache_ancestor_begin.back());
  }
}

void Batch::add_cached_tree_row(Token token, int32_t position, int32_t parent_row, int32_t seq_index, bool logits,
                                int32_t visible, std::span<const int32_t> ancestor_slots) {
  if (cache_ancestor_begin.empty()) {
    visible_prefix.assign(tokens.size(), -1);
    cache_ancestor_begin.assign(tokens.size() + 1, 0);
  }
  add(token, position, parent_row, seq_index, logits);
  visible_prefix.back() = visible;
  cache_ancestors.insert(cache_ancestors.end(), ancestor_slots.begin(), ancestor_slots.end());
  cache_ancestor_begin.back() = static_cast<int32_t>(cache_ancestors.size());
}

namespace {

std::string row_name(int i) { return "batch row " + std::to_string(i); }

}  // namespace

BatchPlan plan_batch(const Batch& batch, std::span<KvCache* const> caches, const ModelConfig& config) {
  const int n = batch.size();
  const auto n_size = static_cast<size_t>(n);
  if (batch.positions.size() != n_size || batch.parent.size() != n_size || batch.seq.size() != n_size ||
      batch.want_logits.size() != n_size) {
    throw Error("batch: arrays differ in length (tokens " + std::to_string(n) + ", positions " +
                std::to_string(batch.positions.size()) + ", parent " + std::to_string(batch.parent.size()) +
                ", seq " + std::to_string(batch.seq.size()) + ", want_logits " +
                std::to_string(batch.want_logits.size()) + ")");
  }
  if (!batch.want_features.empty() && batch.want_features.size() != n_size) {
    throw Error("batch: want_features has " + std::to_string(batch.want_features.size()) + " entries for " +
                std::to_string(n) + " rows (must be empty or one per row)");
  }
  const bool cached_tree = !batch.cache_ancestor_begin.empty() || !batch.visible_prefix.empty();
  if (cached_tree) {
    if (batch.visible_prefix.size() != n_size || batch.cache_ancestor_begin.size() != n_size + 1 ||
        batch.cache_ancestor_begin[0] != 0 ||
        batch.cache_ancestor_begin[n_size] != static_cast<int32_t>(batch.cache_ancestors.size())) {
      throw Error("batch: cached-tree arrays do not match " + std::to_string(n) + " rows (visible_prefix " +
                  std::to_string(batch.visible_prefix.size()) + ", cache_ancestor_begin " +
                  std::to_string(batch.cache_ancestor_begin.size()) + ", cache_ancestors " +
                  std::to_string(batch.cache_ancestors.size()) + ")");
    }
  } else if (!batch.cache_ancestors.empty()) {
    throw Error("batch: cache_ancestors given without cache_ancestor_begin");
  }
  // Cache ancestors of row i (its batch root's, for rows with a batch parent): [begin, end).
  auto ancestors_of = [&](int i) -> std::span<const int32_t> {
    if (!cached_tree) return {};
    const int32_t begin = batch.cache_ancestor_begin[i], end = batch.cache_ancestor_begin[i + 1];
    return std::span<const int32_t>(batch.cache_ancestors).subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
  };
  std::vector<int> batch_root(n_size);  // (N) the row's ancestor (or itself) with parent -1
  BatchPlan plan;
  plan.slot.resize(n_size);
  plan.depth.resize(n_size);
  std::vector<int> seq_plan_of(caches.size(), -1);  // (n_caches) index into plan.seqs
  for (int i = 0; i < n; ++i) {
    const int s = batch.seq[i];
    if (s < 0 || static_cast<size_t>(s) >= caches.size() || caches[s] == nullptr) {
      throw Error(row_name(i) + ": sequence " + std::to_string(s) + " has no KV cache (" +
                  std::to_string(caches.size()) + " given)");
    }
    const Token token = batch.tokens[i];
    if (token < 0 || token >= config.n_vocab) {
      throw Error(row_name(i) + ": token id " + std::to_string(token) + " outside the vocabulary [0, " +
                  std::to_string(config.n_vocab) + ")");
    }
    const int p = batch.parent[i];
    if (p != -1 && (p < 0 || p >= i || batch.seq[p] != s)) {
      throw Error(row_name(i) + ": parent " + std::to_string(p) +
                  " must be -1 or an earlier row of the same sequence " + std::to_string(s));
    }
    if (seq_plan_of[s] < 0) {
      const KvCache* cache = caches[s];
      if (cache->n_layers() != config.n_layers || cache->kv_dim() != config.kv_dim()) {
        throw Error("batch: KV cache of sequence " + std::to_string(s) + " has shape (" +
                    std::to_string(cache->n_layers()) + " layers, kv_dim " + std::to_string(cache->kv_dim()) +
                    "), the model needs (" + std::to_string(config.n_layers) + ", " +
                    std::to_string(config.kv_dim()) + ")");
      }
      for (const SeqPlan& other : plan.seqs) {
        if (other.cache == cache) {
          throw Error("batch: sequences " + std::to_string(other.seq) + " and " + std::to_string(s) +
                      " share one KV cache");
        }
      }
      seq_plan_of[s] = static_cast<int>(plan.seqs.size());
      plan.seqs.push_back(SeqPlan{s, caches[s], cache->size(), cache->size(), {}, {0}, {}});
    }
    SeqPlan& sp = plan.seqs[static_cast<size_t>(seq_plan_of[s])];
    if (cached_tree) {
      const int visible = batch.visible_prefix[i] < 0 ? sp.n_prefix : batch.visible_prefix[i];
      if (visible > sp.n_prefix || (!sp.rows.empty() && visible != sp.n_visible)) {
        throw Error(row_name(i) + ": visible prefix " + std::to_string(batch.visible_prefix[i]) + " must be -1 or in [0, " +
                    std::to_string(sp.n_prefix) + "] and the same for every row of sequence " + std::to_string(s));
      }
      sp.n_visible = visible;
      const std::span<const int32_t> own = ancestors_of(i);
      if (p >= 0 && !own.empty()) throw Error(row_name(i) + ": a row with a batch parent lists cache ancestors");
      for (size_t a = 0; a < own.size(); ++a) {
        if (own[a] < visible || own[a] >= sp.n_prefix || (a > 0 && own[a] <= own[a - 1])) {
          throw Error(row_name(i) + ": cache ancestor slot " + std::to_string(own[a]) + " not increasing in [" +
                      std::to_string(visible) + ", " + std::to_string(sp.n_prefix) + ")");
        }
      }
    }
    batch_root[i] = p < 0 ? i : batch_root[p];
    plan.depth[i] = p < 0 ? 0 : plan.depth[p] + 1;
    const int expected = sp.n_visible + static_cast<int>(ancestors_of(batch_root[i]).size()) + plan.depth[i];
    if (batch.positions[i] != expected) {
      throw Error(row_name(i) + ": position " + std::to_string(batch.positions[i]) + " but sequence " +
                  std::to_string(s) + " shows it " + std::to_string(expected - plan.depth[i]) + " cached tokens and the row is at depth " +
                  std::to_string(plan.depth[i]) + " (expected position " + std::to_string(expected) + ")");
    }
    plan.slot[i] = sp.n_prefix + static_cast<int>(sp.rows.size());
    sp.rows.push_back(i);
    if (batch.want_logits[i]) plan.logit_rows.push_back(i);
    if (!batch.want_features.empty() && batch.want_features[i]) plan.feature_rows.push_back(i);
  }
  for (SeqPlan& sp : plan.seqs) {
    const int needed = static_cast<int>(sp.rows.size());
    if (needed > sp.cache->capacity() - sp.n_prefix) {
      throw Error("batch: sequence " + std::to_string(sp.seq) + " needs " + std::to_string(sp.n_prefix + needed) +
                  " positions (" + std::to_string(sp.n_prefix) + " cached + " + std::to_string(needed) +
                  " new), longer than its context length " + std::to_string(sp.cache->capacity()));
    }
    // Visible extras of each row: its cached-tree ancestors, its batch ancestors root first, itself.
    for (int row : sp.rows) {
      const std::span<const int32_t> cached = ancestors_of(batch_root[static_cast<size_t>(row)]);
      sp.extra_slots.insert(sp.extra_slots.end(), cached.begin(), cached.end());
      const size_t begin = sp.extra_slots.size();
      for (int a = row; a >= 0; a = batch.parent[a]) sp.extra_slots.push_back(plan.slot[a]);
      std::reverse(sp.extra_slots.begin() + static_cast<std::ptrdiff_t>(begin), sp.extra_slots.end());
      sp.extra_begin.push_back(static_cast<int>(sp.extra_slots.size()));
    }
  }
  return plan;
}

}  // namespace specdec
