// GPU fragmentation as the FGD paper measures it (Weng et al., "Beware of Fragmentation:
// Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC 2023): the
// free GPU capacity of a node that a task of the expected workload could not use. For one task
// class: when the class does not fit on the node at all (CPU, memory, GPU model, GPU count),
// every free GPU thousandth of the node is a fragment; when it fits, the free capacity of each
// GPU that has less free than the class asks per GPU. CPU-only classes cannot use GPUs, so for
// them all free GPU capacity is a fragment. A node's fragmentation for a workload is the
// popularity-weighted sum over its classes; the cluster's is the sum over nodes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "placement/cluster.h"

namespace dais::placement {

// The expected workload: task classes and their popularity (weights sum to 1).
struct Workload {
  struct Class {
    TaskSpec shape;  // max_per_node ignored; memory_mib 0 (the paper's classes)
    double weight = 0;
    int64_t memory_mib = 0;  // the class's mean memory: dais uses it (policy.cc), FGD does not
  };
  std::vector<Class> classes;

  // The classes of `tasks` by (CPU, GPUs, GPU share, allowed models): the most popular ones
  // that cover `coverage` of the tasks (at most `max_classes`), weights renormalised.
  static Workload FromTasks(const std::vector<TaskSpec>& tasks, double coverage = 0.95,
                            size_t max_classes = 64);
};

// Fragmentation, in GPU thousandths, of a node with these free resources.
double NodeFragmentation(const NodeState& node, std::span<const int> gpu_free, int64_t cpu_free,
                         int64_t memory_free, const Workload& workload);
double NodeFragmentation(const NodeState& node, const Workload& workload);
double ClusterFragmentation(const Cluster& cluster, const Workload& workload);

}  // namespace dais::placement
