// specdec/batched_draft.h — chain proposals of several sequences (server slots) with ONE draft
// model, each draft forward shared by all of them: level j of every chain is one forward with
// one row per sequence still drafting (plus the catch-up rows of a sequence whose draft cache
// lags its context), so the draft weights are streamed once per level instead of once per
// sequence and level.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "specdec/draft_model.h"

namespace specdec {

class BatchedDraft {
 public:
  // draft_model must outlive this object; every drafter handed to propose() must draft with it.
  // max_rows (>= 1): rows per shared forward; a long catch-up spreads over several forwards
  // (each job still gets one row per forward at least).
  explicit BatchedDraft(Transformer& draft_model, int max_rows = 256);

  struct Job {
    DraftModelDrafter* drafter = nullptr;  // distinct per job (each owns its draft cache and Rng)
    std::span<const Token> context;        // that sequence's committed tokens
    int n_max = 0;
    const SamplingParams* sampling = nullptr;
  };

  // The drafter if `drafter` can draft in a batch with this model (a chain DraftModelDrafter
  // of the same Transformer), else nullptr (lookup, hybrid, trees: they propose alone).
  DraftModelDrafter* batchable(Drafter* drafter) const;

  // One draft per job, in order. Each is bit-identical (tokens, q, and the drafter's state
  // afterwards) to jobs[i].drafter->propose(context, n_max, *sampling) run alone, because the
  // draft model is batch invariant and each sequence samples from its own row with its own
  // sampling params and Rng. Jobs may differ in context, n_max (0 included), sampling and seed.
  // Cost: max over jobs of (catch-up forwards + n_max - 1) forwards, each over at most one row
  // per drafting job plus catch-up rows (at most max_rows rows per forward, one row per job
  // at least). Throws Error from the forward (e.g. a full cache); drafts are then lost.
  std::vector<Draft> propose(std::span<const Job> jobs);

  // Shared forwards and their rows since construction (for metrics and tests).
  int64_t forwards() const { return forwards_; }
  int64_t rows() const { return rows_; }

 private:
  Transformer& model_;
  int max_rows_;
  int64_t forwards_ = 0, rows_ = 0;
  Batch batch_;                  // scratch
  Logits logits_;                // scratch (n_rows_with_logits, n_vocab_draft)
  std::vector<KvCache*> caches_; // (n_participants) indexed by batch.seq
};

}  // namespace specdec
