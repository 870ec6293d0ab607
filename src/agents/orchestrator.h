// The agent orchestrator's policy (docs/agents.md, "Orchestration"): which agents run and which
// are paused, from the agents' priorities, their SLAs and what their runtimes report. Pure: the
// leading scheduler feeds it what the runtimes published in etcd and writes its decisions back
// (cmd/agent_orchestrator.cc); tests feed it directly, with their own clock.
//
// The signal of a shortage is an agent about to miss its SLA: its runs' p99 latency (from the
// trigger's publication to the run's end, so time waiting in the backlog counts) over the last
// window above pause_fraction × sla.p99_ms. Then every agent of lower priority is paused (its
// runtimes stop taking new triggers: they wait in the stream, nothing is lost), freeing what they
// used (the models' instances, the gateway, the CPU) for it. When every running agent of higher
// priority has been within its SLA by a margin (p99 ≤ calm_fraction × pause_fraction × SLA) for
// calm_ms, the paused agents of the highest paused priority resume and work off their backlog; the
// next lower priority waits another calm_ms.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agents/agent_spec.h"

namespace dais::agents {

// What the runtimes of one agent reported, combined.
struct AgentLoad {
  bool reporting = false;  // some runtime reported within the status TTL
  double p99_ms = 0;       // the worst of its runtimes' window p99 (0: no run in the window)
  int64_t window_runs = 0;
  int64_t backlog = 0;  // triggers not yet run (the group's lag plus its pending entries)
};

struct AgentControl {
  std::string state = "running";  // running | paused
  std::string reason;
};

struct Decision {
  std::string agent;
  AgentControl control;
};

struct OrchestratorOptions {
  // Lower priorities are paused when an agent's p99 passes pause_fraction of its SLA (before it
  // misses it: the decision takes a few hundred milliseconds to act), resumed once every running
  // agent stayed within calm_fraction of that threshold for calm_ms.
  double pause_fraction = 0.5;
  double calm_fraction = 0.6;
  int64_t calm_ms = 5000;
};

class Orchestrator {
 public:
  explicit Orchestrator(OrchestratorOptions options = {}) : options_(options) {}

  // The changes to make, each with its reason. `controls`: the agents' current states (an agent
  // missing there is running).
  std::vector<Decision> Evaluate(int64_t now_ms, const std::vector<AgentSpec>& agents,
                                 const std::map<std::string, AgentLoad>& loads,
                                 const std::map<std::string, AgentControl>& controls);

 private:
  OrchestratorOptions options_;
  int64_t calm_since_ms_ = -1;  // since when no running agent of concern misses its SLA margin
};

}  // namespace dais::agents
