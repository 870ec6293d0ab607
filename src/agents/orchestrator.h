// The agent orchestrator's policy (docs/agents.md, "Orchestration"): which agents run and which
// are paused, from the agents' priorities, their SLAs and what their runtimes report. Pure: the
// leading scheduler feeds it what the runtimes published in etcd and writes its decisions back
// (cmd/agent_orchestrator.cc); tests feed it directly, with their own clock.
//
// Two signals of a shortage, each acted on by priority: an agent about to miss its SLA (its runs'
// p99 latency over the last window, from the trigger's publication to the run's end, so time
// waiting in the backlog counts), and a node whose CPU is nearly all busy (its live load,
// cluster/node_load.h) where an agent with an SLA runs. Then every agent of lower priority gives
// way, in two stages:
//   throttled: p99 above throttle_fraction × SLA, or the CPU at cpu_busy: the agent runs at
//     throttle_factor × the rate it ran at (at least min_rate runs/s; its runtimes share it);
//   paused: p99 above pause_fraction × SLA: its runtimes take no new trigger (they wait in the
//     stream, nothing is lost), freeing the models' instances, the gateway and the CPU.
// When every agent of concern has been calm (p99 ≤ calm_fraction × the throttle threshold, its
// nodes' CPU below cpu_calm) for calm_ms, the highest priority that gave way takes one step back
// (paused -> throttled -> running) and works off its backlog; the next step waits another calm_ms.
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
  std::vector<std::string> nodes;  // where its runtimes run (their consumer names: node ids)
};

// A node's live load (cluster/node_load.h).
struct NodeLoad {
  double cpu_busy = 0;  // 0..1 over the last second
};

struct AgentControl {
  std::string state = "running";  // running | throttled | paused
  std::string reason;
  // throttled: runs per second, over all the agent's runtimes; paused: the rate it is to get
  // when released to throttled
  double rate = 0;
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
  // Lower priorities are throttled when an agent's p99 passes throttle_fraction of its SLA (at
  // or above pause_fraction: no throttling on latency) or a node it runs on is cpu_busy (≥ 1:
  // the CPU is no signal), to throttle_factor of the rate they ran at, at least min_rate.
  double throttle_fraction = 0.35;
  double throttle_factor = 0.5;
  double cpu_busy = 0.9;
  double cpu_calm = 0.75;
  double min_rate = 1;
};

class Orchestrator {
 public:
  explicit Orchestrator(OrchestratorOptions options = {}) : options_(options) {}

  // The changes to make, each with its reason. `controls`: the agents' current states (an agent
  // missing there is running).
  std::vector<Decision> Evaluate(int64_t now_ms, const std::vector<AgentSpec>& agents,
                                 const std::map<std::string, AgentLoad>& loads,
                                 const std::map<std::string, AgentControl>& controls,
                                 const std::map<std::string, NodeLoad>& nodes = {});

 private:
  struct Signal {
    int level = 0;  // 0 none, 1 throttle, 2 pause
    std::string why;
  };
  // The worst signal of each priority rank; *calm: every agent of concern within its margin.
  void Signals(const std::vector<AgentSpec>& agents, const std::map<std::string, AgentLoad>& loads,
               const std::map<std::string, AgentControl>& controls,
               const std::map<std::string, NodeLoad>& nodes, Signal worst[3],
               int* uncalm_rank) const;
  // The rate a throttled agent gets.
  double ThrottleRate(const std::string& agent,
                      const std::map<std::string, AgentControl>& controls) const;

  OrchestratorOptions options_;
  std::map<std::string, double> running_rate_;  // runs/s each agent had when last running
  // Paused agents whose signal above eased to the throttle's level: since when.
  std::map<std::string, int64_t> eased_since_ms_;
  int64_t calm_since_ms_ = -1;  // since when no running agent of concern misses its SLA margin
};

}  // namespace dais::agents
