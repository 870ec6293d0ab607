// What every trigger of `dais agent run` does with a finished run (agent.cc, agent_http.cc): its
// metrics (dais_agent_*, docs/metrics.md) and its record in the agent's runs stream (dais ctl get
// runs AGENT).
#pragma once

#include <cstdint>
#include <string>

#include "agents/agent_spec.h"
#include "agents/run.h"
#include "cmd/agent.h"
#include "cmd/agent_actions.h"
#include "metrics/registry.h"
#include "redis/client.h"

namespace dais::cmd {

struct AgentMetrics {
  explicit AgentMetrics(const std::string& agent);
  // Runs by outcome, durations, step durations and errors.
  void Record(const agents::RunTrace& t);
  // A run that ended `latency_ms` after its trigger (what the SLA's p99 is about).
  void RecordLatency(double latency_ms);

  std::string agent;
  metrics::Family<metrics::Counter>* runs;
  metrics::Family<metrics::Histogram>* duration;
  metrics::Family<metrics::Histogram>* steps;
  metrics::Family<metrics::Counter>* step_errors;
  metrics::Family<metrics::Histogram>* latency;
  metrics::Family<metrics::Counter>* dead;
  metrics::Family<metrics::Counter>* http_refused;  // HTTP triggers not run: paused, busy
};

// XADD of the run to spec.RunsStream(), capped near `max_len` entries.
redis::KeyedCommand RunRecord(const agents::AgentSpec& spec, int64_t max_len,
                              const agents::RunTrace& t);

int64_t UnixMs();

// Where the steps' calls go, from the runtime's flags.
AgentEndpoints Endpoints(const AgentCliOptions& o);

}  // namespace dais::cmd
