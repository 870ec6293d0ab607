// `dais scheduler`: the cluster's placement. Without a subcommand, the live leader-elected
// scheduler over etcd (cluster/cluster_scheduler.h; builds with gRPC only); `simulate`: the FGD
// paper's experiment on a node list and a task trace (scheduler/simulator.h) for each placement
// policy, with the live scheduler's policy code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace dais::cmd {

struct SchedulerCliOptions {
  std::string nodes;
  std::string pods;
  std::vector<std::string> policies = {"first-fit", "best-fit", "fgd", "dais"};
  uint64_t seed = 1;
  double stop_at = 1.3;
  std::string csv;   // the curves, one row per policy and point
  std::string json;  // every policy's checkpoints and decision times
  // The live scheduler (no subcommand).
  std::vector<std::string> etcd;
  std::string id;
  std::string policy = "dais";
  int lease_ttl_secs = 5;
  int metrics_port = -1;  // -1: no metrics listener; 0: a free port (logged)
  std::string metrics_address = "0.0.0.0";
  std::string prometheus;  // host:port; empty: rollouts scrape the gateways
  // redis://HOST:PORT/STREAM of the nodes' feedback and label streams: rollouts with an accuracy
  // label join them (streams/live_accuracy.h).
  std::string feedback_stream, label_stream;
  int64_t agent_calm_ms = 5000;  // agents/orchestrator.h
  double agent_pause_fraction = 0.5;
  double agent_throttle_fraction = 0.35;
  double agent_cpu_busy = 0.9;
};

CLI::App* AddSchedulerCommand(CLI::App* app, SchedulerCliOptions* options);
int RunScheduler(CLI::App* command, const SchedulerCliOptions& options);

}  // namespace dais::cmd
