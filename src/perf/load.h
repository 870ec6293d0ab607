// The load loop: keeps a fixed number of requests in flight (concurrency) or sends requests on a
// schedule regardless of answers (request rate), and measures in windows until the throughput
// is stable.
//
// Threading: one thread per in-flight slot (concurrency N: N threads; rate: --max-threads
// threads taking the scheduled send times in turn), each with its own InferSession, so its own
// connection; or, with `connections` K < N in concurrency mode, K threads whose sessions each
// keep about N/K requests in flight on their connection. Threads append (end time, latency, ok)
// records to their own buffer under its mutex; the calling thread (the coordinator) collects the
// buffers at window ends, takes the server statistics snapshots, and prints the progress line.
// Sessions are kept for the next level, except ones aborted because a request did not finish within
// the stop grace period.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dais/status.h"
#include "perf/client.h"
#include "perf/stats.h"

namespace dais::perf {

struct LoadOptions {
  int64_t batch_size = 1;
  double warmup_secs = 1.0;
  int64_t measurement_interval_ms = 2000;
  double stability_percentage = 10.0;
  int max_trials = 10;
  bool progress = false;  // live line on stderr
  // At the end of a level, requests still in flight after this long are aborted.
  int64_t stop_grace_ms = 10'000;
  // Request-rate mode.
  bool poisson = false;
  uint64_t seed = 1;
  int max_threads = 16;
  // Concurrency mode: spread the in-flight requests over this many sessions (connections), each
  // with several in flight (RunSlots; gRPC's HTTP/2 streams) and one thread. 0: one session and
  // thread per in-flight request.
  int connections = 0;
};

// Exactly one of the two is set.
struct Level {
  int64_t concurrency = 0;
  double rate = 0;  // requests per second
};

struct LevelMeasurement {
  Level level;
  int windows = 0;      // measurement windows run
  bool stable = false;  // the last 3 windows agreed within the stability percentage
  std::vector<double> window_throughputs;  // infer/s of each window
  // Over the windows reported (the last 3, or fewer if fewer ran):
  double seconds = 0;
  int64_t successes = 0;
  int64_t errors = 0;
  int64_t delayed = 0;                // rate mode: sent over 1 ms after their scheduled time
  std::vector<int64_t> latencies_ns;  // of the successful requests
  std::optional<ServerBreakdown> server;
};

// Makes the session of load thread `index` (its requests are built here, once).
using SessionFactory = std::function<StatusOr<std::unique_ptr<InferSession>>(int index)>;
// A server statistics snapshot; nullopt when unavailable.
using StatsSource = std::function<std::optional<ServerStats>()>;

class LoadRunner {
 public:
  LoadRunner(LoadOptions options, SessionFactory sessions, StatsSource stats);
  ~LoadRunner();

  // Runs one level: warm-up, then windows until stable or max_trials. An error only if
  // sessions cannot be made; failed requests are counted, not returned.
  StatusOr<LevelMeasurement> Run(const Level& level);

  // The first failed request's error (empty status until one fails), for printing once.
  Status first_error() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dais::perf
