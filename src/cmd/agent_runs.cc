#include "cmd/agent_runs.h"

#include <chrono>

namespace dais::cmd {

AgentMetrics::AgentMetrics(const std::string& agent) : agent(agent) {
  auto& r = metrics::Registry::Global();
  runs = &r.AddCounter("dais_agent_runs_total",
                       "Runs of an agent by outcome (completed, stopped by a branch, failed).",
                       {"agent", "outcome"});
  duration = &r.AddHistogram("dais_agent_run_duration_seconds", "Duration of an agent's runs.",
                             {"agent"}, metrics::LatencyBuckets());
  steps = &r.AddHistogram("dais_agent_step_duration_seconds",
                          "Duration of an agent's steps (failed ones included).", {"agent", "step"},
                          metrics::LatencyBuckets());
  step_errors =
      &r.AddCounter("dais_agent_step_errors_total", "Steps that failed.", {"agent", "step"});
  latency = &r.AddHistogram(
      "dais_agent_run_latency_seconds",
      "From a trigger's publication (an HTTP trigger: its arrival) to its run's end (what the "
      "SLA's p99 is about).",
      {"agent"}, metrics::LatencyBuckets());
  dead = &r.AddCounter("dais_agent_dead_lettered_total",
                       "Triggers given up after max_attempts failed runs.", {"agent"});
  http_refused = &r.AddCounter("dais_agent_http_refused_total",
                               "HTTP triggers answered 503 without a run, by reason (paused or "
                               "throttled: the orchestrator gave way to "
                               "a higher priority; busy: every worker running and the queue full).",
                               {"agent", "reason"});
}

void AgentMetrics::Record(const agents::RunTrace& t) {
  runs->Get({agent, t.outcome}).Increment();
  duration->Get({agent}).Observe(static_cast<double>(t.duration_us) / 1e6);
  for (const auto& s : t.steps) {
    steps->Get({agent, s.name}).Observe(static_cast<double>(s.duration_us) / 1e6);
    if (s.outcome == "error") step_errors->Get({agent, s.name}).Increment();
  }
}

void AgentMetrics::RecordLatency(double latency_ms) {
  latency->Get({agent}).Observe(latency_ms / 1000);
}

redis::KeyedCommand RunRecord(const agents::AgentSpec& spec, int64_t max_len,
                              const agents::RunTrace& t) {
  return {spec.RunsStream(),
          {"XADD", spec.RunsStream(), "MAXLEN", "~", std::to_string(max_len), "*", "run_id",
           t.run_id, "outcome", t.outcome, "trace", t.ToJson()}};
}

AgentEndpoints Endpoints(const AgentCliOptions& o) {
  return AgentEndpoints{o.gateway, o.features_url, o.token,
                        o.txn_url, o.emit_max_len, o.emitted_ttl_secs};
}

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace dais::cmd
