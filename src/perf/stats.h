// Statistics of a measurement: latency percentiles, the stability rule, and the server-side
// breakdown from two ModelStatistics snapshots. Pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace dais::perf {

// Nearest-rank percentile (p in (0, 100]) of `sorted` (ascending); 0 when empty.
int64_t Percentile(const std::vector<int64_t>& sorted, double p);

struct LatencySummary {
  double avg_us = 0;
  double p50_us = 0, p90_us = 0, p95_us = 0, p99_us = 0;
};
// Sorts `latencies_ns` in place and summarizes them in microseconds.
LatencySummary SummarizeLatencies(std::vector<int64_t>* latencies_ns);

// True when the last 3 values are each within `percentage` % of their mean (all zero counts as
// stable); false with fewer than 3 values.
bool IsStable(const std::vector<double>& throughputs, double percentage);

// One server statistics snapshot of the measured model (summed over the versions reported).
struct Duration {
  uint64_t count = 0;
  uint64_t ns = 0;
};
struct ServerStats {
  uint64_t inference_count = 0;
  uint64_t execution_count = 0;
  Duration success, queue, compute_input, compute_infer, compute_output;
};

// The breakdown between two snapshots. Each part is its total time over its count (Triton counts
// compute_* per request, dais per execution: either way the time a request spends in it).
struct ServerBreakdown {
  double queue_us = 0;
  double compute_input_us = 0;
  double compute_infer_us = 0;
  double compute_output_us = 0;
  double success_us = 0;    // the server's whole request time
  uint64_t inferences = 0;  // inference_count delta
  uint64_t executions = 0;  // execution_count delta
  double avg_batch = 0;     // inferences / executions (0 without executions)
};
ServerBreakdown Delta(const ServerStats& before, const ServerStats& after);

}  // namespace dais::perf
