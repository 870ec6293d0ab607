#include "placement/simulator.h"

#include <algorithm>
#include <chrono>
#include <random>

namespace dais::placement {
namespace {

SimulationPoint Point(const Cluster& cluster, const Workload& workload, int64_t arrived_milli,
                      int64_t tasks, int64_t failed) {
  const double capacity = static_cast<double>(cluster.gpu_capacity_milli());
  SimulationPoint p;
  p.arrived = static_cast<double>(arrived_milli) / capacity;
  p.allocated_ratio = static_cast<double>(cluster.gpu_allocated_milli()) / capacity;
  p.unallocated_gpus =
      static_cast<double>(cluster.gpu_capacity_milli() - cluster.gpu_allocated_milli()) / kGpuMilli;
  p.fragmented_gpus = ClusterFragmentation(cluster, workload) / kGpuMilli;
  p.tasks_arrived = tasks;
  p.tasks_failed = failed;
  return p;
}

double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

StatusOr<SimulationResult> Simulate(const std::vector<NodeSpec>& nodes,
                                    const std::vector<TaskSpec>& tasks, Policy& policy,
                                    const Workload& workload, const SimulationOptions& options) {
  Cluster cluster(nodes);
  if (cluster.gpu_capacity_milli() == 0) return InvalidArgument("the nodes have no GPUs");
  int64_t trace_demand = 0;
  for (const TaskSpec& t : tasks) trace_demand += t.GpuDemandMilli();
  if (trace_demand == 0) return InvalidArgument("the tasks ask for no GPUs");

  SimulationResult r;
  r.policy = std::string(policy.name());
  r.gpu_capacity = static_cast<double>(cluster.gpu_capacity_milli()) / kGpuMilli;
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<size_t> pick(0, tasks.size() - 1);
  const auto stop =
      static_cast<int64_t>(options.stop_at * static_cast<double>(cluster.gpu_capacity_milli()));
  std::vector<double> checkpoints = options.checkpoints;
  std::sort(checkpoints.begin(), checkpoints.end());
  size_t next_checkpoint = 0;
  double next_curve = 0;
  int64_t arrived = 0, count = 0, failed = 0;
  std::vector<double> decision_us;
  while (arrived < stop && count < options.max_tasks) {
    const TaskSpec& task = static_cast<size_t>(count) < tasks.size()
                               ? tasks[static_cast<size_t>(count)]
                               : tasks[pick(rng)];
    ++count;
    arrived += task.GpuDemandMilli();
    const auto t0 = std::chrono::steady_clock::now();
    std::optional<Placement> p = policy.Place(cluster, task);
    const auto t1 = std::chrono::steady_clock::now();
    decision_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    if (p) {
      cluster.Apply(task, *p);
    } else {
      ++failed;
    }
    const double ratio =
        static_cast<double>(arrived) / static_cast<double>(cluster.gpu_capacity_milli());
    while (next_checkpoint < checkpoints.size() && ratio >= checkpoints[next_checkpoint]) {
      r.checkpoints.push_back(Point(cluster, workload, arrived, count, failed));
      r.checkpoints.back().arrived = checkpoints[next_checkpoint++];
    }
    if (ratio >= next_curve) {
      r.curve.push_back(Point(cluster, workload, arrived, count, failed));
      while (next_curve <= ratio) next_curve += options.curve_step;
    }
  }
  r.decisions = static_cast<int64_t>(decision_us.size());
  for (double us : decision_us) r.decision_seconds += us / 1e6;
  r.decision_p50_us = Percentile(decision_us, 0.5);
  r.decision_p99_us = Percentile(decision_us, 0.99);
  return r;
}

}  // namespace dais::placement
