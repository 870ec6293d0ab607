#include "runtime/batch_queue.h"

#include <algorithm>
#include <cstdint>

#include "dais/datatype.h"

namespace dais::runtime {

std::string BatchShapeKey(const InferenceRequest& request, bool batching) {
  std::string key;
  for (const Tensor& t : request.inputs) {
    key += t.name;
    key += ':';
    for (size_t i = batching ? 1 : 0; i < t.shape.size(); ++i) {
      key += std::to_string(t.shape[i]);
      key += ',';
    }
    key += ';';
  }
  return key;
}

uint64_t AddMicros(uint64_t ns, uint64_t us) {
  if (us == 0) return 0;
  // Beyond any real time (and beyond what a steady_clock time_point holds): no deadline.
  if (ns >= static_cast<uint64_t>(INT64_MAX) ||
      us > (static_cast<uint64_t>(INT64_MAX) - ns) / 1000) {
    return 0;
  }
  return ns + us * 1000;
}

void BatchQueue::TakeCancelled(std::vector<RequestPtr>* cancelled) {
  for (auto& [level, q] : levels_) {
    for (auto it = q.begin(); it != q.end();) {
      const auto& flag = it->request->cancelled;
      if (flag && flag->load(std::memory_order_relaxed)) {
        cancelled->push_back(std::move(it->request));
        it = q.erase(it);
        --size_;
      } else {
        ++it;
      }
    }
  }
}

void BatchQueue::TakeAll(std::vector<RequestPtr>* out) {
  for (auto& [level, q] : levels_) {
    for (Entry& e : q) out->push_back(std::move(e.request));
    q.clear();
  }
  size_ = 0;
}

BatchQueue::BatchQueue(BatchingOptions options) : options_(std::move(options)) {}

uint32_t BatchQueue::LevelOf(const InferenceRequest& r) const {
  if (options_.priority_levels == 0) return 0;
  if (r.priority == 0 || r.priority > options_.priority_levels) return options_.default_priority;
  return r.priority;
}

const QueuePolicy& BatchQueue::PolicyOf(uint32_t level) const {
  auto it = options_.level_policies.find(level);
  return it == options_.level_policies.end() ? options_.default_policy : it->second;
}

Status BatchQueue::Push(RequestPtr& request, uint64_t now_ns) {
  uint32_t level = LevelOf(*request);
  const QueuePolicy& policy = PolicyOf(level);
  std::deque<Entry>& q = levels_[level];
  if (policy.max_queue_size > 0 && q.size() >= policy.max_queue_size) {
    // Unavailable, as Triton answers a full queue: the code clients retry (gRPC UNAVAILABLE,
    // HTTP 503).
    return Unavailable("inference request queue of model '" + request->model_name +
                       "' is full (max_queue_size " + std::to_string(policy.max_queue_size) +
                       "); retry later");
  }
  uint64_t timeout_us = policy.default_timeout_us;
  if (request->timeout_us > 0 && (policy.allow_timeout_override || timeout_us == 0)) {
    timeout_us = request->timeout_us;
  }
  request->enqueue_ns = now_ns;
  request->deadline_ns = AddMicros(now_ns, timeout_us);
  std::string key = BatchShapeKey(*request, options_.max_batch_size > 0);
  if (options_.adaptive) arrivals_.Observe(now_ns, request->batch_size);
  q.push_back(Entry{std::move(request), std::move(key)});
  ++size_;
  return OkStatus();
}

void BatchQueue::TakeExpired(uint64_t now_ns, std::vector<RequestPtr>* expired) {
  for (auto& [level, q] : levels_) {
    if (!PolicyOf(level).reject_on_timeout) continue;
    for (auto it = q.begin(); it != q.end();) {
      if (it->request->deadline_ns != 0 && it->request->deadline_ns <= now_ns) {
        expired->push_back(std::move(it->request));
        it = q.erase(it);
        --size_;
      } else {
        ++it;
      }
    }
  }
}

uint64_t BatchQueue::EarliestDeadline() const {
  uint64_t earliest = 0;
  for (const auto& [level, q] : levels_) {
    if (!PolicyOf(level).reject_on_timeout) continue;
    for (const Entry& e : q) {
      uint64_t d = e.request->deadline_ns;
      if (d != 0 && (earliest == 0 || d < earliest)) earliest = d;
    }
  }
  return earliest;
}

bool BatchQueue::Dispatch(int64_t rows, uint64_t head_ns, uint64_t now_ns, uint64_t* wake_ns,
                          int64_t* wake_rows, DispatchReason* reason) const {
  // max_queue_delay: Triton's bound on the wait; with the adaptive policy only when set.
  uint64_t delay_deadline = UINT64_MAX;
  if (options_.max_queue_delay_us > 0) {
    delay_deadline = AddMicros(head_ns, options_.max_queue_delay_us);
    if (delay_deadline == 0) delay_deadline = UINT64_MAX;  // overflow: no bound
  } else if (!options_.adaptive) {
    delay_deadline = head_ns;  // delay 0: at once
  }
  *reason = DispatchReason::kQueueDelay;
  if (now_ns >= delay_deadline) return true;
  if (options_.adaptive) {
    const bool cpu_bound = options_.cpu_bound != nullptr && options_.cpu_bound(now_ns);
    AdaptiveDecision d = DecideAdaptive(options_.adaptive_options, cost_, arrivals_, rows,
                                        options_.max_batch_size, head_ns, now_ns, cpu_bound);
    *reason = d.reason;
    if (d.dispatch) return true;
    *wake_ns = std::min(d.wake_ns, delay_deadline);
    *wake_rows = d.wake_rows;
    return false;
  }
  *wake_ns = delay_deadline == UINT64_MAX ? 0 : delay_deadline;
  return false;
}

bool BatchQueue::NextBatch(uint64_t now_ns, std::vector<RequestPtr>* batch, uint64_t* wake_ns,
                           DispatchReason* reason) {
  *wake_ns = 0;
  wake_size_ = 0;
  DispatchReason ignored;
  if (reason == nullptr) reason = &ignored;
  if (size_ == 0) return false;
  // The head: oldest request of the best non-empty level.
  std::deque<Entry>* head_q = nullptr;
  for (auto& [level, q] : levels_) {
    if (!q.empty()) {
      head_q = &q;
      break;
    }
  }
  if (!options_.dynamic) {
    *reason = DispatchReason::kUnbatched;
    batch->push_back(std::move(head_q->front().request));
    head_q->pop_front();
    --size_;
    return true;
  }
  const Entry& head = head_q->front();
  const std::string key = head.shape_key;
  const uint64_t head_enqueue = head.request->enqueue_ns;

  // Gather compatible requests, in priority then FIFO order, up to max_batch_size.
  struct Pick {
    std::deque<Entry>* q;
    size_t index;
    int64_t size;
  };
  std::vector<Pick> picks;
  int64_t total = 0;
  for (auto& [level, q] : levels_) {
    for (size_t i = 0; i < q.size() && total < options_.max_batch_size; ++i) {
      if (q[i].shape_key != key) continue;
      int64_t bs = q[i].request->batch_size;
      if (total + bs > options_.max_batch_size) continue;
      picks.push_back(Pick{&q, i, bs});
      total += bs;
    }
  }

  bool dispatch = false;
  if (total >= options_.max_batch_size) {
    dispatch = true;
    *reason = DispatchReason::kFull;
  } else if (!options_.preferred_batch_sizes.empty()) {
    int64_t largest = *std::max_element(options_.preferred_batch_sizes.begin(),
                                        options_.preferred_batch_sizes.end());
    if (total >= largest) {
      // Trim to the largest preferred size that request boundaries allow.
      int64_t sum = 0;
      size_t keep = 0;
      while (keep < picks.size() && sum + picks[keep].size <= largest) sum += picks[keep++].size;
      picks.resize(std::max<size_t>(keep, 1));
      dispatch = true;
      *reason = DispatchReason::kPreferred;
    }
  }
  int64_t wake_rows = 0;
  if (!dispatch && !Dispatch(total, head_enqueue, now_ns, wake_ns, &wake_rows, reason)) {
    // Each queued request adds at least one row: waking at this size is never early (a request
    // of several rows may make it late, by no more than the timed wake-up).
    if (wake_rows > total) wake_size_ = size_ + static_cast<size_t>(wake_rows - total);
    return false;
  }
  *wake_ns = 0;
  // Move the picks out; erase from the back of each queue so indices stay valid.
  std::vector<RequestPtr> taken;
  for (const Pick& p : picks) taken.push_back(std::move((*p.q)[p.index].request));
  for (auto it = picks.rbegin(); it != picks.rend(); ++it) {
    it->q->erase(it->q->begin() + static_cast<std::ptrdiff_t>(it->index));
    --size_;
  }
  for (RequestPtr& r : taken) batch->push_back(std::move(r));
  return true;
}

}  // namespace dais::runtime
