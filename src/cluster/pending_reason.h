// Why an instance fits on no node, in words a person can act on ("no node fits one instance
// (3 nodes: 1 without the memory; 2 without 2 free GPU(s) (largest free: 1))"), and as one label
// for the scheduler's failure metric: the thing most nodes lack.
#pragma once

#include <string>
#include <vector>

#include "placement/cluster.h"

namespace dais::cluster {

struct Unplaceable {
  std::string message;
  // "no_nodes", "excluded", "cpu", "memory", "gpu_model", "gpus" or "anti_affinity".
  std::string reason;
};

// Each node is counted by the first thing it lacks, in the order of the reasons above. An
// excluded node is counted by `excluded_why[node]` when given ("cordoned", "without the labels
// zone=a", ...), else as "excluded".
Unplaceable ExplainUnplaceable(const placement::Cluster& cluster, const placement::TaskSpec& task,
                               const std::vector<std::string>* excluded_why = nullptr);

}  // namespace dais::cluster
