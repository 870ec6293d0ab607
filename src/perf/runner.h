// `dais perf` from options to report: asks the server for the model's inputs, builds the
// requests, runs every load level, prints the table and writes the CSV/JSON files.
#pragma once

#include "perf/options.h"

namespace dais::perf {

// Exit codes of RunPerf.
constexpr int kExitOk = 0;
constexpr int kExitSetup = 1;      // bad options, server unreachable, model unknown, bad data
constexpr int kExitAllFailed = 2;  // every request of a level failed

// Runs the measurement; the table goes to stdout, messages to stderr.
int RunPerf(const PerfOptions& options);

}  // namespace dais::perf
