// The dynamic batcher's queue and batch-forming policy, as a pure data structure: no threads,
// no locks, no clock of its own. The caller passes "now" in, so tests drive it with a fake clock
// (see batch_queue_test.cc); ModelVersion wraps it with a mutex and instance threads.
//
// Policy (Triton's dynamic batcher, simplified where noted in docs/batching.md):
//  - Requests wait in one FIFO per priority level; level 1 is served first.
//  - Admission: a level holding max_queue_size requests rejects at once (Unavailable, as Triton:
//  clients retry it).
//  - A request's deadline is enqueue time + its timeout (the request's own when the policy allows
//    overriding, else the level's default). Past its deadline it is dropped before it runs
//    (timeout_action REJECT) or kept (DELAY).
//  - A batch starts at the oldest request of the best level and takes every later request with
//    the same non-batch shapes, while the total batch size stays <= max_batch_size. Requests
//    with other shapes are never padded into it: they wait for a batch of their own.
//  - The batch is dispatched when it is full, when it reaches the largest preferred size, or when
//    its oldest request has waited max_queue_delay. Without dynamic batching every request runs
//    alone.
//  - With the adaptive policy (adaptive_batching.h) the wait is decided from the measured arrival
//    rate and batch costs instead; max_queue_delay, when set, still caps it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "dais/status.h"
#include "runtime/adaptive_batching.h"
#include "runtime/inference_request.h"

namespace dais::runtime {

struct QueuePolicy {
  bool reject_on_timeout = true;  // timeout_action REJECT (else DELAY)
  uint64_t default_timeout_us = 0;
  bool allow_timeout_override = false;
  uint64_t max_queue_size = 0;  // 0: unbounded by config; ModelVersion applies dais's default
};

struct BatchingOptions {
  bool dynamic = false;        // dynamic_batching present and max_batch_size > 0
  int64_t max_batch_size = 0;  // 0: the model does not batch
  std::vector<int64_t> preferred_batch_sizes;
  uint64_t max_queue_delay_us = 0;
  uint32_t priority_levels = 0;  // 0: a single level
  uint32_t default_priority = 0;
  QueuePolicy default_policy;
  std::map<uint32_t, QueuePolicy> level_policies;
  bool adaptive = false;  // parameters batching_policy: "adaptive"
  AdaptiveOptions adaptive_options;
  // Whether the process is CPU-bound at `now_ns` (CpuLoad::CpuBound); null: never. A function
  // so that tests drive it along with their fake clock.
  bool (*cpu_bound)(uint64_t now_ns) = nullptr;
};

class BatchQueue {
 public:
  explicit BatchQueue(BatchingOptions options);

  // Admits a request at time `now_ns` or returns it with Unavailable (queue full).
  // Sets request->enqueue_ns and deadline_ns.
  Status Push(RequestPtr& request, uint64_t now_ns);

  // Moves requests whose deadline passed (REJECT levels only) into `expired`.
  void TakeExpired(uint64_t now_ns, std::vector<RequestPtr>* expired);

  // If a batch should run at `now_ns`, moves its requests into `batch` and returns true.
  // Otherwise returns false and sets `wake_ns` to when the decision may change without a new
  // push (0: only a push can change it). `reason` (may be null) says why a batch left.
  bool NextBatch(uint64_t now_ns, std::vector<RequestPtr>* batch, uint64_t* wake_ns,
                 DispatchReason* reason = nullptr);

  // Whether a push can change the last NextBatch decision, so the instance thread waiting on it
  // should be woken: false only while the adaptive policy waits for a batch size the queue has
  // not reached (its timed wake-up still comes). Every NextBatch call renews it.
  bool WakeOnPush() const { return wake_size_ == 0 || size_ >= wake_size_; }

  // A batch of `rows` took `ns` to execute (the adaptive policy's cost model).
  void ObserveExecution(int64_t rows, uint64_t ns) { cost_.Observe(rows, ns); }
  // A warm-up batch of `rows` took `ns`: a first guess until a real batch of that size runs.
  void ObserveWarmup(int64_t rows, uint64_t ns) { cost_.Seed(rows, ns); }
  // What a batch of `rows` is expected to take (0: nothing measured yet).
  double EstimatedCostNs(int64_t rows) const { return cost_.Estimate(rows); }

  // Moves requests whose client cancelled into `cancelled`, so they neither run nor count
  // towards a batch.
  void TakeCancelled(std::vector<RequestPtr>* cancelled);

  // Moves every queued request into `out` (used when shutting down without draining).
  void TakeAll(std::vector<RequestPtr>* out);

  // Earliest deadline among requests that a timeout would drop (0: none).
  uint64_t EarliestDeadline() const;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  struct Entry {
    RequestPtr request;
    std::string shape_key;  // non-batch dims of every input: requests batch only with equals
  };
  uint32_t LevelOf(const InferenceRequest& r) const;
  const QueuePolicy& PolicyOf(uint32_t level) const;

  // Whether the batch of `rows` whose oldest request arrived at `head_ns` leaves now; if not,
  // `wake_ns` says when to decide again (0: only a push can change it).
  bool Dispatch(int64_t rows, uint64_t head_ns, uint64_t now_ns, uint64_t* wake_ns,
                int64_t* wake_rows, DispatchReason* reason) const;

  BatchingOptions options_;
  std::map<uint32_t, std::deque<Entry>> levels_;  // ascending: level 1 first
  size_t size_ = 0;
  size_t wake_size_ = 0;  // WakeOnPush: the queue size at which a push should wake (0: any)
  BatchCostModel cost_;
  ArrivalEstimator arrivals_;
};

// ns + us microseconds; 0 when us is 0 (none) or the sum would overflow (treated as none).
uint64_t AddMicros(uint64_t ns, uint64_t us);

// The key under which requests may share a batch: datatype and non-batch dims of every input.
std::string BatchShapeKey(const InferenceRequest& request, bool batching);

}  // namespace dais::runtime
