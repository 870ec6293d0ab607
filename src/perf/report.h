// Results of `dais perf`: one row per load level, as a human table, CSV and JSON. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "perf/load.h"
#include "perf/stats.h"

namespace dais::perf {

// One level's row. Latencies are client-side microseconds; throughput counts inferences
// (successful requests * batch size) per second.
struct LevelResult {
  int64_t concurrency = 0;  // 0 in request-rate mode
  double rate = 0;          // target requests/s; 0 in concurrency mode
  double throughput = 0;
  double latency_avg_us = 0, p50_us = 0, p90_us = 0, p95_us = 0, p99_us = 0;
  int64_t requests = 0;  // successful
  int64_t errors = 0;
  int64_t delayed = 0;
  int windows = 0;
  bool stable = false;
  std::optional<ServerBreakdown> server;
};

// Summarizes a measurement (sorts its latencies).
LevelResult MakeResult(LevelMeasurement* m, int64_t batch_size);

// The table's header (two lines) and one row, fixed-width; server columns only when
// `server_stats`.
std::string TableHeader(bool rate_mode, bool server_stats);
std::string TableRow(const LevelResult& r, bool rate_mode, bool server_stats);

// CSV with the header
// concurrency,rate,throughput_infer_per_sec,latency_avg_us,p50_us,p90_us,p95_us,p99_us,errors,
// server_queue_us,server_compute_input_us,server_compute_infer_us,server_compute_output_us,
// server_success_us,avg_batch,stable
// (server columns empty when unavailable; stable true/false).
std::string ToCsv(const std::vector<LevelResult>& rows);
// A JSON array of objects with the CSV's keys (server values null when unavailable).
std::string ToJson(const std::vector<LevelResult>& rows);

// "concurrency 16: window 3, 12345 infer/s, p99 812 us"; window 0: "...: warming up".
std::string ProgressLine(const Level& level, int window, double infer_per_sec, double p99_us);
// "concurrency 16" / "rate 100/s"
std::string LevelLabel(const Level& level);

}  // namespace dais::perf
