// An agent (docs/agents.md): a declared pipeline of the platform's own operations, started by a
// trigger, run by `dais agent run`. Written by `dais ctl apply -f` ('kind: agent') to
// /dais/agents/<name> as JSON (AgentToJson; JSON is YAML, so ParseAgentYaml reads it back).
//
//   kind: agent
//   name: inventory-alert
//   tenant: retail                       # the owner (a gateway tenant)
//   priority: high                       # high | normal | low: who is shed first when short
//   sla: {p99_ms: 500, runs_per_second: 20, window: 10s}   # p99 over the runs of the window
//   resources: {cpu_milli: 250, memory_mib: 128}
//   trigger:
//     stream: redis://127.0.0.1:6379/orders   # a Redis stream (a consumer group reads it), or
//     every: 30s                              # a timer (one run per period)
//     http: true                              # and/or a call: POST /v1/agents/<name>/runs
//     group: inventory-alert                  # the consumer group (default: the agent's name)
//   redis: 127.0.0.1:6379                # runs, emits, a timer's markers (default: the stream's)
//   max_attempts: 3                      # runs of one trigger before it is dead-lettered
//   concurrency: 2                       # runs at once (a runtime's workers)
//   run_timeout: 5s                      # the deadline of one run (every step's calls)
//   capabilities:                        # what the agent may use; checked at apply
//     routes: [demand]                   # inference through the gateway, by route
//     feature_groups: [stock]
//     collections: [similar-users]       # vector memory
//     streams: [alerts]                  # streams it writes (emit)
//     transactions: [reserve]            # `dais txn` types it places (txn)
//   steps:
//     - {name: stock, features: {features: [stock:on_hand], entities: {sku: "${event.sku}"}}}
//     - name: forecast
//       infer: {route: demand, inputs: [{name: INPUT__0, datatype: FP32, shape: [1, 2],
//                                         data: ["${event.qty}", "${stock.on_hand}"]}]}
//     - {name: short, branch: {if: "${forecast.OUTPUT__0.0} > ${stock.on_hand}"}}
//     - {name: alert, emit: {stream: alerts, fields: {sku: "${event.sku}"}}}
//     - {name: hold, txn: {type: reserve, params: {sku: "${event.sku}", qty: 1}}}
//
// A step's body is kept as JSON: its strings may hold ${...} references to the trigger's event,
// the run and the earlier steps' results (agents/template.h).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/agent_placement.h"
#include "dais/status.h"

namespace dais::agents {

using cluster::kAgentsPrefix;  // "/dais/agents/"
// What each runtime reports, under a lease (<agent>/<consumer>: {"consumer", "time_ms",
// "p99_ms", "window_runs", "backlog", "paused"}), and what the orchestrator decided
// (<agent>: {"state": "running" | "paused", "reason", "time_ms"}).
inline constexpr const char* kAgentStatusPrefix = "/dais/agent-status/";
inline constexpr const char* kAgentControlPrefix = "/dais/agent-control/";

enum class StepKind { kFeatures, kInfer, kMemorySearch, kMemoryUpsert, kEmit, kBranch, kTxn };
const char* StepKindName(StepKind kind);  // "features", "infer", "memory_search", ...

struct StepSpec {
  std::string name;
  StepKind kind = StepKind::kBranch;
  std::string body;  // the step's mapping as JSON
  // What the body names, for validation and the capability check.
  std::string route;                        // infer
  std::string collection;                   // memory_search / memory_upsert
  std::string stream;                       // emit
  std::string txn_type;                     // txn
  std::vector<std::string> feature_groups;  // features
};

struct Capabilities {
  std::vector<std::string> routes, feature_groups, collections, streams;
  std::vector<std::string> transactions;  // `dais txn` types
};

struct AgentSpec {
  std::string name;
  std::string tenant;
  std::string priority = "normal";  // high | normal | low
  double sla_p99_ms = 0;            // 0: none declared
  double sla_runs_per_second = 0;
  int64_t sla_window_ms = 10000;  // the p99 is over the runs that ended in this window
  int64_t cpu_milli = 250;
  int64_t memory_mib = 128;
  // Trigger: a stream (redis://HOST:PORT/STREAM) or a timer.
  std::string trigger_stream;
  std::string redis;  // host:port of its runs, emits and timer; default: the trigger stream's
  int64_t trigger_every_ms = 0;
  // Also (or only) an HTTP call: POST /v1/agents/<name>/runs through the gateway or to a runtime.
  bool trigger_http = false;
  std::string group;  // default: name
  int max_attempts = 3;
  int concurrency = 2;  // runs at once per runtime (its worker threads)
  int64_t run_timeout_ms = 5000;
  Capabilities capabilities;
  std::vector<StepSpec> steps;

  // "host:port" and the stream of trigger_stream (empty for a timer).
  std::string RedisAddress() const;
  std::string TriggerStreamName() const;
  // Where the runs are recorded (a capped Redis stream beside the trigger) and where triggers
  // that failed max_attempts times go.
  std::string RunsStream() const { return "dais:agent:" + name + ":runs"; }
  std::string DeadLetterStream() const { return "dais:agent:" + name + ":dead"; }
  // 0 high, 1 normal, 2 low: lower sheds last.
  int PriorityRank() const;
};

// Parses and validates: unknown fields, wrong types, a step of no known kind or of two, a
// reference to an unknown or later step, a step using what `capabilities` does not list are
// InvalidArgument naming the field ("steps[2] (forecast).infer.route: 'demand' is not in
// capabilities.routes").
StatusOr<AgentSpec> ParseAgentYaml(const std::string& yaml);
// The same from a document already loaded (`dais ctl apply`: its quoted scalars stay strings,
// which a YAML::Dump of the document would lose).
StatusOr<AgentSpec> ParseAgentNode(const YAML::Node& root);
std::string AgentToJson(const AgentSpec& agent);

}  // namespace dais::agents
