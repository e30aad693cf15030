// model/batch_plan.h — validated layout of one forward pass (internal to the model layer).
#pragma once

#include <span>
#include <vector>

#include "specdec/model.h"

namespace specdec {

// The rows of one sequence inside a batch.
struct SeqPlan {
  int seq = 0;
  KvCache* cache = nullptr;
  int n_prefix = 0;               // cached positions before the call
  int n_visible = 0;              // cache prefix every row sees (Batch::visible_prefix; else n_prefix)
  std::vector<int> rows;          // (M) batch rows of this sequence, in batch order
  std::vector<int> extra_begin;   // (M + 1) into extra_slots
  std::vector<int> extra_slots;   // (sum of ancestors + M) cached-tree then batch ancestors root first, then the row
};

struct BatchPlan {
  std::vector<int> slot;        // (N) cache slot each row's K/V is written to
  std::vector<int> depth;       // (N) depth inside the batch (0 = child of the cached prefix)
  std::vector<SeqPlan> seqs;    // sequences in order of first appearance
  std::vector<int> logit_rows;  // rows with want_logits, in batch order
  std::vector<int> feature_rows;  // rows with want_features, in batch order
};

// Validates the batch against the caches and the model (array lengths, sequence ids, token
// ids, parents earlier in the same sequence, positions = prefix length + depth, capacity) and
// lays it out. Throws Error naming the row and value on a bad batch. Touches no cache.
// Cost: O(N * depth).
BatchPlan plan_batch(const Batch& batch, std::span<KvCache* const> caches, const ModelConfig& config);

}  // namespace specdec
