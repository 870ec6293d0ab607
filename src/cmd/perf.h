// `dais perf`: measures throughput and latency of a model on a KServe v2 server (dais or any
// other), like Triton's perf_analyzer. Flags wired here; the work is in src/perf/.
#pragma once

#include "perf/options.h"

namespace CLI {
class App;
}

namespace dais::cmd {

void AddPerfFlags(CLI::App* app, perf::PerfOptions* options);
int RunPerf(const perf::PerfOptions& options);

}  // namespace dais::cmd
