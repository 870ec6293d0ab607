// Per model-version statistics in the shape of Triton's statistics extension, plus the
// Prometheus metrics of that version. Updated by instance threads with relaxed atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

#include "common/mutex.h"
#include "dais/tensor.h"
#include "metrics/registry.h"
#include "runtime/adaptive_batching.h"

namespace dais::runtime {

struct DurationStat {
  std::atomic<uint64_t> count{0};
  std::atomic<uint64_t> ns{0};
  void Add(uint64_t duration_ns) {
    count.fetch_add(1, std::memory_order_relaxed);
    ns.fetch_add(duration_ns, std::memory_order_relaxed);
  }
};

struct BatchStat {
  uint64_t count = 0;
  uint64_t input_ns = 0, infer_ns = 0, output_ns = 0;
};

// Failure reasons, used as the "reason" label of dais_inference_request_failure_total.
enum class FailReason { kInvalid, kRejected, kTimeout, kBackend, kUnavailable, kCancelled };
const char* FailReasonLabel(FailReason reason);

class ModelStats {
 public:
  ModelStats(const std::string& model, const std::string& version);

  void RecordSuccess(uint64_t request_ns, uint64_t queue_ns);
  void RecordFailure(FailReason reason, uint64_t request_ns);
  // The response's scores into dais_inference_score: for the first output, when it is FP32 or
  // FP64 with 1 or 2 values per row (a binary classifier's p, or [1 - p, p]), each row's last
  // value. `rows`: the request's rows (its batch size; 1 for a model that does not batch), so a
  // [N] output of N rows counts N scores and a [2] answer of one row counts one. The
  // distribution per version is what a quality-gated rollout compares (PSI).
  void RecordScores(const Tensor& first_output, int64_t rows);
  // One executed batch of `batch_size` inferences.
  void RecordExecution(int64_t batch_size, uint64_t input_ns, uint64_t infer_ns,
                       uint64_t output_ns);
  // A batch left the queue for `reason`; its oldest request had waited `wait_ns`.
  void RecordDispatch(DispatchReason reason, uint64_t wait_ns);
  void SetPending(int64_t pending) { pending_->Set(static_cast<double>(pending)); }
  void SetLoadDuration(double seconds) { load_seconds_->Set(seconds); }

  // Triton statistics JSON object for this version ({"name", "version", ...}).
  std::string ToJson(const std::string& model, const std::string& version) const;
  // Copy of the per-batch-size statistics (for the gRPC ModelStatistics answer).
  std::map<int64_t, BatchStat> BatchStats() const;

  // Drops this version's series from /metrics (on final unload).
  static void RemoveMetrics(const std::string& model, const std::string& version);

  DurationStat success, fail, queue, compute_input, compute_infer, compute_output;
  std::atomic<uint64_t> inference_count{0}, execution_count{0}, last_inference_ms{0};

 private:
  std::string model_, version_;
  mutable Mutex mu_;
  std::map<int64_t, BatchStat> batch_stats_ DAIS_GUARDED_BY(mu_);
  metrics::Counter* success_total_;
  metrics::Counter* inference_total_;
  metrics::Counter* exec_total_;
  metrics::Histogram* request_seconds_;
  metrics::Histogram* queue_seconds_;
  metrics::Histogram* input_seconds_;
  metrics::Histogram* infer_seconds_;
  metrics::Histogram* output_seconds_;
  metrics::Histogram* batch_size_;
  metrics::Gauge* pending_;
  metrics::Gauge* load_seconds_;
  metrics::Counter* dispatches_[std::size(kAllDispatchReasons)];
  metrics::Histogram* batch_wait_seconds_;
  metrics::Histogram* scores_;
};

}  // namespace dais::runtime
