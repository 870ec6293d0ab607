// The FGD paper's experiment (ATC'23, §5) on any node list and task trace: tasks arrive in trace
// order, then, once the trace is used up, sampled from it uniformly with replacement ("workload
// inflation"), and never leave; each is placed by the policy under test (the live scheduler's
// policy objects) or fails. The run ends when the GPU demand that arrived reaches `stop_at` times
// the cluster's GPU capacity. At each checkpoint (arrived demand / capacity) it records how many
// GPUs are allocated, unallocated, and fragmented (FGD's measure for the trace's workload).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dais/status.h"
#include "placement/cluster.h"
#include "placement/fragmentation.h"
#include "placement/policy.h"

namespace dais::placement {

struct SimulationOptions {
  uint64_t seed = 1;
  double stop_at = 1.3;
  std::vector<double> checkpoints = {0.8, 0.9, 1.0, 1.1, 1.2};
  double curve_step = 0.02;  // a point of the curve every 2 % of capacity
  int64_t max_tasks = 10'000'000;
};

struct SimulationPoint {
  double arrived = 0;           // GPU demand arrived / GPU capacity
  double allocated_ratio = 0;   // GPUs allocated / capacity
  double unallocated_gpus = 0;  // capacity - allocated, in GPUs
  double fragmented_gpus = 0;   // FGD's fragmentation of the cluster, in GPUs
  int64_t tasks_arrived = 0;
  int64_t tasks_failed = 0;
};

struct SimulationResult {
  std::string policy;
  double gpu_capacity = 0;  // GPUs
  std::vector<SimulationPoint> checkpoints;
  std::vector<SimulationPoint> curve;
  int64_t decisions = 0;
  double decision_seconds = 0;  // time spent in Policy::Place
  double decision_p50_us = 0;
  double decision_p99_us = 0;
};

// InvalidArgument when the trace asks for no GPUs or no node has any.
StatusOr<SimulationResult> Simulate(const std::vector<NodeSpec>& nodes,
                                    const std::vector<TaskSpec>& tasks, Policy& policy,
                                    const Workload& workload, const SimulationOptions& options);

}  // namespace dais::placement
