// Placement policies behind one interface: where one instance goes, given the cluster as it is.
// The live scheduler and the simulator call the same objects.
//
//   first-fit  the first node (in the cluster's order) where the instance fits; GPUs packed.
//   best-fit   the node left with the least free resources (CPU and GPU shares, weighted
//              equally), the classic packing scheduler the FGD paper compares against.
//   fgd        Fragmentation Gradient Descent (ATC'23): the node, and the GPU on it, whose
//              fragmentation for the expected workload grows least.
//   dais       FGD's step on FGD's GPUs, with nodes ranked by fragmentation for a workload whose
//              single-GPU and GPU-sharing classes also need their mean memory, and the ties of
//              CPU-only instances (frequent: any node where they leave GPU fragmentation
//              unchanged) broken toward the node where they strand the least GPU capacity, then
//              nodes without GPUs, then nodes whose GPUs are all taken. The default. Measured no
//              worse than FGD on the public openb traces and multi-GPU variants, not guaranteed
//              (docs/scheduler.md).
//
// Thread-safety: a policy may keep caches; one caller at a time.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dais/status.h"
#include "placement/cluster.h"
#include "placement/fragmentation.h"

namespace dais::placement {

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const = 0;
  // Where `task` should go now, or nullopt when it fits on no node.
  virtual std::optional<Placement> Place(const Cluster& cluster, const TaskSpec& task) = 0;
};

// "first-fit", "best-fit", "fgd" or "dais"; `workload` is the expected workload (FGD, dais).
// InvalidArgument naming the known policies for another name.
StatusOr<std::unique_ptr<Policy>> MakePolicy(std::string_view name, Workload workload);
const std::vector<std::string>& PolicyNames();

}  // namespace dais::placement
