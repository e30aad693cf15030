// model/batch.cpp — Batch helpers and the validation/plan of a forward pass.
#include "model/batch_plan.h"

#include <algorithm>
#include <string>

#include "specdec/error.h"

namespace specdec {

void Batch::clear() {
  tokens.clear();
  positions.clear();
  parent.clear();
  seq.clear();
  want_logits.clear();
}

void Batch::add(Token token, int32_t position, int32_t parent_row, int32_t seq_index, bool logits) {
  tokens.push_back(token);
  positions.push_back(position);
  parent.push_back(parent_row);
  seq.push_back(seq_index);
  want_logits.push_back(logits ? 1 : 0);
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
      plan.seqs.push_back(SeqPlan{s, caches[s], cache->size(), {}, {0}, {}});
    }
    SeqPlan& sp = plan.seqs[static_cast<size_t>(seq_plan_of[s])];
    plan.depth[i] = p < 0 ? 0 : plan.depth[p] + 1;
    const int expected = sp.n_prefix + plan.depth[i];
    if (batch.positions[i] != expected) {
      throw Error(row_name(i) + ": position " + std::to_string(batch.positions[i]) + " but sequence " +
                  std::to_string(s) + " has " + std::to_string(sp.n_prefix) + " cached tokens and the row is at depth " +
                  std::to_string(plan.depth[i]) + " (expected position " + std::to_string(expected) + ")");
    }
    plan.slot[i] = sp.n_prefix + static_cast<int>(sp.rows.size());
    sp.rows.push_back(i);
    if (batch.want_logits[i]) plan.logit_rows.push_back(i);
  }
  for (SeqPlan& sp : plan.seqs) {
    const int needed = static_cast<int>(sp.rows.size());
    if (needed > sp.cache->capacity() - sp.n_prefix) {
      throw Error("batch: sequence " + std::to_string(sp.seq) + " needs " + std::to_string(sp.n_prefix + needed) +
                  " positions (" + std::to_string(sp.n_prefix) + " cached + " + std::to_string(needed) +
                  " new), longer than its context length " + std::to_string(sp.cache->capacity()));
    }
    // Visible extras of each row: its ancestors root first, then itself.
    for (int row : sp.rows) {
      const size_t begin = sp.extra_slots.size();
      for (int a = row; a >= 0; a = batch.parent[a]) sp.extra_slots.push_back(plan.slot[a]);
      std::reverse(sp.extra_slots.begin() + static_cast<std::ptrdiff_t>(begin), sp.extra_slots.end());
      sp.extra_begin.push_back(static_cast<int>(sp.extra_slots.size()));
    }
  }
  return plan;
}

}  // namespace specdec
