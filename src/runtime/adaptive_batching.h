// The adaptive batching policy (config.pbtxt parameter batching_policy: "adaptive";
// docs/batching.md): pure decision code, no clock of its own, driven by BatchQueue with the time
// the caller passes in, so tests run it on a fake clock.
//
// Triton's dynamic batcher makes a lone request wait the full max_queue_delay, and with delay 0
// it batches only what queued while the instance was busy: the right delay depends on the model
// and the load, and users pick it by hand. This policy measures both instead:
//  - the arrival rate, as an exponentially weighted mean gap between arriving rows;
//  - the execution time of each batch size it has run (an exponentially weighted mean per size,
//    interpolated between measured sizes, extrapolated linearly beyond them).
// When an instance is free and a batch of n rows could run, it dispatches at once unless waiting
// for k > n rows raises the instance's throughput, k / ((k - n) * gap + cost(k)), above n /
// cost(n), the instances could not keep up with the arrivals running batches of n, and the oldest
// request would still finish within the model's latency target. Arrivals that stop make the gap
// grow (the time since the last arrival counts), so a wait is abandoned rather than sat out.
//
// That rule prices the instance's idle time, which is what a wait costs when cores are free. When
// the cores are busy and this process is what keeps them busy (CpuLoad::CpuBound), the
// instance's wait is not lost: the threads reading the next requests use the core. What counts then
// is the CPU a row costs, cost(k) / k, which falls with the batch size (one FP32 product of 64 rows
// costs a fraction of 64 products of one): the policy waits for the k rows that minimise it
// (by at least kMinGain), within the latency target, while the arrivals keep coming (no more
// than two mean gaps since the last one).
#pragma once

#include <cstdint>
#include <map>

namespace dais::runtime {

// Why a batch left the queue (the reason label of dais_batch_dispatches_total).
enum class DispatchReason {
  kUnbatched,      // the model has no dynamic batching: every request runs alone
  kFull,           // max_batch_size reached
  kPreferred,      // the largest preferred_batch_size reached
  kQueueDelay,     // the oldest request waited max_queue_delay_microseconds (0: at once)
  kNoGain,         // adaptive: waiting for more rows would not raise throughput
  kLatencyTarget,  // adaptive: waiting longer would break the latency target
  kCpuBound,       // adaptive, CPU-bound: the cheapest rows per row came, or arrivals stopped
};
const char* DispatchReasonLabel(DispatchReason reason);
inline constexpr DispatchReason kAllDispatchReasons[] = {
    DispatchReason::kUnbatched,  DispatchReason::kFull,   DispatchReason::kPreferred,
    DispatchReason::kQueueDelay, DispatchReason::kNoGain, DispatchReason::kLatencyTarget,
    DispatchReason::kCpuBound};

struct AdaptiveOptions {
  uint64_t latency_target_us = 10000;  // queue wait + execution of the oldest request
  int instances = 1;                   // instances that share the queue
};

// Execution time per batch size, from what ran.
class BatchCostModel {
 public:
  void Observe(int64_t rows, uint64_t ns);
  // A first guess (the warm-up, whose first call may include one-time work such as TorchScript's
  // profiling runs): used until the first real measurement of that size replaces it.
  void Seed(int64_t rows, uint64_t ns);
  // Estimated ns for a batch of `rows`; 0 when nothing was measured yet.
  double Estimate(int64_t rows) const;
  // The smallest measured size above `rows`, 0 if none.
  int64_t NextMeasured(int64_t rows) const;
  bool empty() const { return cost_.empty(); }

 private:
  struct Mean {
    double ns = 0;
    bool seeded = false;  // a guess, replaced by the first Observe
  };
  std::map<int64_t, Mean> cost_;  // rows -> mean ns
};

// Mean gap between arriving rows.
class ArrivalEstimator {
 public:
  void Observe(uint64_t now_ns, int64_t rows);
  // The mean gap in ns, or the time since the last arrival when that is longer; 0 when fewer
  // than two arrivals were seen.
  double GapNs(uint64_t now_ns) const;
  // The mean gap alone (0 when fewer than two arrivals were seen).
  double MeanGapNs() const { return samples_ < 2 ? 0 : gap_ns_; }
  // Time since the last arrival.
  double SinceLastNs(uint64_t now_ns) const {
    return now_ns > last_ns_ ? static_cast<double>(now_ns - last_ns_) : 0;
  }

 private:
  uint64_t last_ns_ = 0;
  double gap_ns_ = 0;
  int samples_ = 0;
};

struct AdaptiveDecision {
  bool dispatch = true;
  DispatchReason reason = DispatchReason::kNoGain;
  uint64_t wake_ns = 0;  // when not dispatching: when to decide again without a new arrival
  // When not dispatching: arrivals before the batch reaches this many rows cannot change the
  // decision (0: any arrival may), so they need not wake the instance thread to re-decide.
  int64_t wake_rows = 0;
};

// The decision for a batch of `rows` (< max_batch_size) whose oldest request arrived at
// `head_ns`, with an instance free at `now_ns`; `cpu_bound`: CpuLoad::CpuBound.
AdaptiveDecision DecideAdaptive(const AdaptiveOptions& options, const BatchCostModel& cost,
                                const ArrivalEstimator& arrivals, int64_t rows,
                                int64_t max_batch_size, uint64_t head_ns, uint64_t now_ns,
                                bool cpu_bound = false);

}  // namespace dais::runtime
