// spec/batched_draft.cpp — see specdec/batched_draft.h. The per-sequence work (catch-up,
// sampling, q, cache bookkeeping) is DraftModelDrafter's own step code, the same that its
// propose() runs alone; this file only packs the steps of several drafters into shared forwards.
#include "specdec/batched_draft.h"

#include <algorithm>
#include <set>
#include <string>

#include "specdec/error.h"
#include "specdec/timer.h"

namespace specdec {

BatchedDraft::BatchedDraft(Transformer& draft_model, int max_rows) : model_(draft_model), max_rows_(max_rows) {
  if (max_rows < 1) throw Error("batched draft: max_rows " + std::to_string(max_rows) + " must be >= 1");
}

DraftModelDrafter* BatchedDraft::batchable(Drafter* drafter) const {
  auto* d = dynamic_cast<DraftModelDrafter*>(drafter);
  if (!d || !d->batchable() || &d->model() != &model_) return nullptr;
  return d;
}

std::vector<Draft> BatchedDraft::propose(std::span<const Job> jobs) {
  const double t0 = now_seconds();
  std::set<const DraftModelDrafter*> seen;
  for (const Job& job : jobs) {
    SPECDEC_CHECK(job.drafter && job.sampling, "batched draft: a job without a drafter or sampling params");
    SPECDEC_CHECK(batchable(job.drafter) == job.drafter, "batched draft: drafter " + job.drafter->name() +
                                                             " does not draft chains with this model");
    SPECDEC_CHECK(seen.insert(job.drafter).second, "batched draft: one drafter in two jobs");
  }
  for (const Job& job : jobs) job.drafter->start_chain(job.context, job.n_max, *job.sampling);

  std::vector<DraftModelDrafter*> participants;  // (n_participants) jobs with rows in this forward
  for (;;) {
    batch_.clear();
    caches_.clear();
    participants.clear();
    for (const Job& job : jobs) {
      const int room = std::max(max_rows_ - batch_.size(), 1);
      if (job.drafter->add_step_rows(batch_, static_cast<int32_t>(caches_.size()), room) == 0) continue;
      caches_.push_back(&job.drafter->cache_);
      participants.push_back(job.drafter);
    }
    if (participants.empty()) break;
    model_.forward(batch_, caches_, logits_);
    ++forwards_;
    rows_ += batch_.size();
    int logits_row = 0;  // rows that asked come back in batch order, one per participant at most
    for (DraftModelDrafter* d : participants) d->take_step_logits(logits_, d->step_wants_logits() ? logits_row++ : -1);
  }

  // Time is shared evenly among the jobs (each drafter's draft_seconds()).
  const double share = jobs.empty() ? 0.0 : (now_seconds() - t0) / static_cast<double>(jobs.size());
  std::vector<Draft> drafts;  // (n_jobs)
  drafts.reserve(jobs.size());
  for (const Job& job : jobs) drafts.push_back(job.drafter->finish_chain(share));
  return drafts;
}

}  // namespace specdec
