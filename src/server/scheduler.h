// server/scheduler.h — N slots, a bounded queue, and one thread that runs every busy slot's
// next rows in ONE batched target forward per iteration (prefill chunks and verify rows of
// several sequences side by side, each with its own KV cache), with a load-aware draft length.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "server/job.h"
#include "server/load_aware_k.h"
#include "server/slot.h"
#include "specdec/batched_draft.h"
#include "specdec/engine.h"

namespace specdec::server {

class Metrics;

struct SchedulerOptions {
  int n_slots = 1;             // --parallel
  int queue_max = 16;          // requests waiting for a slot before 503
  int prefill_chunk = 256;     // prompt rows per forward (shared by the slots prefilling)
  int probe_interval = 16;     // load-aware K: a plain iteration every N
  // Slots drafting chains with the draft model share each draft forward (one per level for
  // all of them, spec/batched_draft.h); false: each slot drafts alone (for comparisons).
  bool batch_drafts = true;
};

class Scheduler {
 public:
  // engine must outlive the scheduler; metrics may be null. Starts the scheduler thread.
  Scheduler(Engine& engine, const SchedulerOptions& options, Metrics* metrics);
  ~Scheduler();  // stops the thread; pending jobs finish as "cancelled"

  // Queues a job (submitted_at is set here). Returns false, without queueing, when the queue
  // already holds queue_max jobs. Thread-safe.
  bool submit(const std::shared_ptr<Job>& job);

  int queue_length() const;
  int busy_slots() const;
  int n_slots() const { return static_cast<int>(slots_.size()); }
  int queue_max() const { return options_.queue_max; }
  int current_k() const;

 private:
  void run();
  void admit(double now);                 // queue -> free slots (longest shared prefix first)
  void expire(double now);                // cancelled / timed out jobs leave their slot
  void iterate();                         // one batched forward over the busy slots
  // Every decoding slot's draft for this iteration (k_batch: the load-aware K); returns the
  // nodes drafted and adds the drafting time to *seconds.
  int draft_all(const std::vector<Slot*>& decoding, int k_batch, double* seconds);
  void fail_all_busy(const std::string& error);

  Engine& engine_;
  SchedulerOptions options_;
  Metrics* metrics_;
  std::vector<std::unique_ptr<Slot>> slots_;
  LoadAwareK k_controller_;
  std::unique_ptr<BatchedDraft> batched_draft_;  // with a draft model and batch_drafts

  mutable std::mutex mutex_;              // guards queue_, stopping_, busy count, current K
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  int n_busy_ = 0;
  int current_k_ = 0;
  bool stopping_ = false;
  std::thread thread_;

  Batch batch_;                           // scratch
  Logits logits_;                         // scratch (n_rows, n_vocab)
};

}  // namespace specdec::server
