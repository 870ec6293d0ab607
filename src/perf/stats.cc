#include "perf/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace dais::perf {

int64_t Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return sorted[std::min(index, sorted.size() - 1)];
}

LatencySummary SummarizeLatencies(std::vector<int64_t>* latencies_ns) {
  LatencySummary s;
  if (latencies_ns->empty()) return s;
  std::sort(latencies_ns->begin(), latencies_ns->end());
  const double sum = std::accumulate(latencies_ns->begin(), latencies_ns->end(), 0.0);
  s.avg_us = sum / static_cast<double>(latencies_ns->size()) / 1000.0;
  s.p50_us = static_cast<double>(Percentile(*latencies_ns, 50)) / 1000.0;
  s.p90_us = static_cast<double>(Percentile(*latencies_ns, 90)) / 1000.0;
  s.p95_us = static_cast<double>(Percentile(*latencies_ns, 95)) / 1000.0;
  s.p99_us = static_cast<double>(Percentile(*latencies_ns, 99)) / 1000.0;
  return s;
}

bool IsStable(const std::vector<double>& throughputs, double percentage) {
  if (throughputs.size() < 3) return false;
  auto last = throughputs.end() - 3;
  const double mean = (last[0] + last[1] + last[2]) / 3.0;
  if (mean == 0) return last[0] == 0 && last[1] == 0 && last[2] == 0;
  const double tolerance = mean * percentage / 100.0;
  for (int i = 0; i < 3; ++i) {
    if (std::fabs(last[i] - mean) > tolerance) return false;
  }
  return true;
}

namespace {

double AverageUs(const Duration& before, const Duration& after) {
  if (after.count <= before.count || after.ns < before.ns) return 0;
  return static_cast<double>(after.ns - before.ns) /
         static_cast<double>(after.count - before.count) / 1000.0;
}

uint64_t Diff(uint64_t before, uint64_t after) { return after > before ? after - before : 0; }

}  // namespace

ServerBreakdown Delta(const ServerStats& before, const ServerStats& after) {
  ServerBreakdown b;
  b.queue_us = AverageUs(before.queue, after.queue);
  b.compute_input_us = AverageUs(before.compute_input, after.compute_input);
  b.compute_infer_us = AverageUs(before.compute_infer, after.compute_infer);
  b.compute_output_us = AverageUs(before.compute_output, after.compute_output);
  b.success_us = AverageUs(before.success, after.success);
  b.inferences = Diff(before.inference_count, after.inference_count);
  b.executions = Diff(before.execution_count, after.execution_count);
  b.avg_batch =
      b.executions > 0 ? static_cast<double>(b.inferences) / static_cast<double>(b.executions) : 0;
  return b;
}

}  // namespace dais::perf
