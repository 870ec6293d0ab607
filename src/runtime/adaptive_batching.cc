#include "runtime/adaptive_batching.h"

#include <algorithm>
#include <iterator>

namespace dais::runtime {
namespace {

// Weight of the newest sample in the running means: about the last 8 arrivals / batches count.
constexpr double kCostWeight = 0.2;
constexpr double kGapWeight = 0.125;
// A wait must promise at least this much more throughput than dispatching now: the estimates
// are noisy, and a wait that gains 1 % is not worth its latency.
constexpr double kMinGain = 1.05;
// A wake-up is never set closer than this: the instance thread's timed wait is not finer.
constexpr uint64_t kMinWakeNs = 20000;
// Batch sizes looked at beyond the rows queued (bounds the work of one decision).
constexpr int64_t kMaxLookahead = 512;
// CPU-bound waits last while the last arrival is at most this many mean gaps old.
constexpr double kFlowingGaps = 2.0;
// The CPU-bound rule applies only while running the arrivals in batches of the rows queued would
// keep the instances busy less than this share of the time. Above it the instances are the main
// consumer of the CPU, and their idle time is lost throughput, not CPU lent to the I/O threads
// (measured on a 256->768->768->10 MLP at concurrency 64: waiting lost 4-8 % against delay 0).
constexpr double kCpuBoundMaxInstanceLoad = 0.5;

}  // namespace

const char* DispatchReasonLabel(DispatchReason reason) {
  switch (reason) {
    case DispatchReason::kUnbatched:
      return "unbatched";
    case DispatchReason::kFull:
      return "max_batch_size";
    case DispatchReason::kPreferred:
      return "preferred_batch_size";
    case DispatchReason::kQueueDelay:
      return "max_queue_delay";
    case DispatchReason::kNoGain:
      return "adaptive_no_gain";
    case DispatchReason::kLatencyTarget:
      return "adaptive_latency_target";
    case DispatchReason::kCpuBound:
      return "adaptive_cpu_bound";
  }
  return "unknown";
}

void BatchCostModel::Observe(int64_t rows, uint64_t ns) {
  if (rows <= 0) return;
  auto [it, inserted] = cost_.try_emplace(rows, Mean{static_cast<double>(ns), false});
  if (inserted) return;
  Mean& m = it->second;
  if (m.seeded || static_cast<double>(ns) * 4 < m.ns) {
    // A guess replaced; or one-time work over (TorchScript profiles a module's first calls,
    // milliseconds each for a model that then runs in microseconds): start from the new figure
    // rather than decaying towards it over dozens of batches.
    m = Mean{static_cast<double>(ns), false};
  } else {
    m.ns += kCostWeight * (static_cast<double>(ns) - m.ns);
  }
}

void BatchCostModel::Seed(int64_t rows, uint64_t ns) {
  if (rows <= 0) return;
  auto [it, inserted] = cost_.try_emplace(rows, Mean{static_cast<double>(ns), true});
  if (!inserted && it->second.seeded) {
    it->second.ns = std::min(it->second.ns, static_cast<double>(ns));
  }
}

double BatchCostModel::Estimate(int64_t rows) const {
  if (cost_.empty() || rows <= 0) return 0;
  auto hi = cost_.lower_bound(rows);
  if (hi != cost_.end() && hi->first == rows) return hi->second.ns;
  if (hi == cost_.begin()) {
    // Below every measured size: proportional to the smallest (never dearer than measured).
    return hi->second.ns * static_cast<double>(rows) / static_cast<double>(hi->first);
  }
  auto lo = std::prev(hi);
  if (hi == cost_.end()) {
    // Above every measured size: linear, so no economy of scale is assumed that was not seen.
    return lo->second.ns * static_cast<double>(rows) / static_cast<double>(lo->first);
  }
  const double f =
      static_cast<double>(rows - lo->first) / static_cast<double>(hi->first - lo->first);
  return lo->second.ns + f * (hi->second.ns - lo->second.ns);
}

int64_t BatchCostModel::NextMeasured(int64_t rows) const {
  auto it = cost_.upper_bound(rows);
  return it == cost_.end() ? 0 : it->first;
}

void ArrivalEstimator::Observe(uint64_t now_ns, int64_t rows) {
  if (rows <= 0) return;
  if (samples_ > 0 && now_ns >= last_ns_) {
    const double gap = static_cast<double>(now_ns - last_ns_) / static_cast<double>(rows);
    gap_ns_ = samples_ == 1 ? gap : gap_ns_ + kGapWeight * (gap - gap_ns_);
  }
  last_ns_ = now_ns;
  if (samples_ < 2) ++samples_;
}

double ArrivalEstimator::GapNs(uint64_t now_ns) const {
  if (samples_ < 2) return 0;
  const double since = now_ns > last_ns_ ? static_cast<double>(now_ns - last_ns_) : 0;
  return std::max(gap_ns_, since);
}

namespace {

// CPU-bound: the rows to wait for that cost the least CPU each, or `rows` if no wait pays. Per-row
// cost is interpolated linearly between measured sizes, so k / cost(k) is monotonic between two
// of them and flat beyond the largest: only measured sizes need looking at.
int64_t CheapestRows(const BatchCostModel& cost, double gap, int64_t rows, int64_t last,
                     double waited, double target, double now_cost) {
  double best_rate = static_cast<double>(rows) / now_cost * kMinGain;
  int64_t best = rows;
  for (int64_t k = cost.NextMeasured(rows); k != 0 && k <= last; k = cost.NextMeasured(k)) {
    const double k_cost = cost.Estimate(k);
    if (waited + static_cast<double>(k - rows) * gap + k_cost > target) break;
    const double rate = static_cast<double>(k) / k_cost;
    if (rate > best_rate) {
      best_rate = rate;
      best = k;
    }
  }
  return best;
}

}  // namespace

AdaptiveDecision DecideAdaptive(const AdaptiveOptions& options, const BatchCostModel& cost,
                                const ArrivalEstimator& arrivals, int64_t rows,
                                int64_t max_batch_size, uint64_t head_ns, uint64_t now_ns,
                                bool cpu_bound) {
  AdaptiveDecision d;
  const double gap = arrivals.GapNs(now_ns);
  const double now_cost = cost.Estimate(rows);
  // Nothing measured yet: dispatch, as with no delay; the measurements come from what runs.
  if (gap <= 0 || now_cost <= 0) return d;
  const double mean_gap = arrivals.MeanGapNs();
  // The share of the time the instances would be busy running the arrivals in batches of `rows`
  // (infinite when every arrival came at once: no spare time either).
  const double instance_load = now_cost / (static_cast<double>(rows) * mean_gap *
                                           static_cast<double>(std::max(1, options.instances)));
  if (cpu_bound && instance_load < kCpuBoundMaxInstanceLoad) {
    d.reason = DispatchReason::kCpuBound;
    // Arrivals stopped (a closed loop of clients all waiting on this queue): nothing to wait for.
    if (arrivals.SinceLastNs(now_ns) > kFlowingGaps * mean_gap) return d;
    const double target = static_cast<double>(options.latency_target_us) * 1e3;
    const double waited = now_ns > head_ns ? static_cast<double>(now_ns - head_ns) : 0;
    const int64_t last = std::min(max_batch_size, rows + kMaxLookahead);
    const int64_t best = CheapestRows(cost, mean_gap, rows, last, waited, target, now_cost);
    if (best == rows) {
      if (waited + mean_gap + cost.Estimate(rows + 1) > target) {
        d.reason = DispatchReason::kLatencyTarget;
      }
      return d;
    }
    // Decide again when the awaited rows should have come, when the arrivals would count as
    // stopped (so that a lone request is not kept waiting for rows that never come), or at the
    // last moment the queued rows still meet the target; each arrival decides sooner.
    const double expected = static_cast<double>(best - rows) * mean_gap;
    const double stopped = kFlowingGaps * mean_gap - arrivals.SinceLastNs(now_ns) + 1;
    const double latest = std::max(0.0, target - waited - now_cost);
    const double delay = std::min({expected, stopped, latest});
    d.dispatch = false;
    d.wake_rows = best;
    d.wake_ns = now_ns + std::max(static_cast<uint64_t>(delay), kMinWakeNs);
    return d;
  }
  // The next row comes after the queued ones would have run: with costs that do not fall as
  // batches grow, k / ((k - n) * gap + cost(k)) <= k / ((k - n) * cost(n) / n + cost(n)) =
  // n / cost(n) for every k, so no wait can pay (the usual case at light load, decided at once).
  if (gap * static_cast<double>(rows) >= now_cost) return d;
  const double target = static_cast<double>(options.latency_target_us) * 1e3;
  const double waited = now_ns > head_ns ? static_cast<double>(now_ns - head_ns) : 0;
  const double now_rate = static_cast<double>(rows) / now_cost;
  double best_rate = now_rate * kMinGain;
  int64_t best = rows;
  const int64_t last = std::min(max_batch_size, rows + kMaxLookahead);
  for (int64_t k = rows + 1; k <= last; ++k) {
    const double wait = static_cast<double>(k - rows) * gap;
    const double k_cost = cost.Estimate(k);
    if (waited + wait + k_cost > target) {
      if (k == rows + 1) d.reason = DispatchReason::kLatencyTarget;
      break;
    }
    const double rate = static_cast<double>(k) / (wait + k_cost);
    if (rate > best_rate) {
      best_rate = rate;
      best = k;
    }
  }
  if (best == rows) return d;
  // Wait: decide again when the awaited rows should have come (each arrival decides sooner), at
  // the latest when running the rows queued now would only just meet the target.
  const double expected = static_cast<double>(best - rows) * gap;
  const double latest = std::max(0.0, target - waited - now_cost);
  const auto delay = static_cast<uint64_t>(std::min(expected, latest));
  d.dispatch = false;
  d.wake_ns = now_ns + std::max(delay, kMinWakeNs);
  return d;
}

}  // namespace dais::runtime
