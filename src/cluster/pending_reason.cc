#include "cluster/pending_reason.h"

#include <algorithm>
#include <array>
#include <map>

namespace dais::cluster {

Unplaceable ExplainUnplaceable(const placement::Cluster& c, const placement::TaskSpec& task,
                               const std::vector<std::string>* excluded_why) {
  enum { kExcluded, kCpu, kMemory, kModel, kGpus, kSpread, kKinds };
  static constexpr std::array<const char*, kKinds> kLabels = {"excluded",  "cpu",  "memory",
                                                              "gpu_model", "gpus", "anti_affinity"};
  std::array<int, kKinds> count{};
  int largest_free = 0;
  std::map<std::string, int> excluded;  // why -> nodes
  for (size_t i = 0; i < c.nodes().size(); ++i) {
    const placement::NodeState& n = c.nodes()[i];
    if (n.excluded) {
      ++count[kExcluded];
      const bool known =
          excluded_why != nullptr && i < excluded_why->size() && !(*excluded_why)[i].empty();
      ++excluded[known ? (*excluded_why)[i]
                       : "cordoned, or excluded by labels or a recent failure"];
    } else if (task.cpu_milli > n.cpu_free) {
      ++count[kCpu];
    } else if (task.memory_mib > n.memory_free) {
      ++count[kMemory];
    } else if (task.num_gpu > 0 && !n.ModelAllowed(task)) {
      ++count[kModel];
    } else if (task.num_gpu > 0 && n.GpusWithFree(task.gpu_milli) < task.num_gpu) {
      ++count[kGpus];  // "largest free" among these: the nodes that lack only GPUs
      largest_free = std::max(largest_free, n.GpusWithFree(task.gpu_milli));
    } else {
      ++count[kSpread];
    }
  }
  if (c.nodes().empty()) return {"no node is registered", "no_nodes"};
  std::string r = "no node fits one instance (" + std::to_string(c.nodes().size()) + " nodes:";
  auto add = [&r, &count](int kind, const std::string& what) {
    if (count[kind] > 0) r += " " + std::to_string(count[kind]) + " " + what + ";";
  };
  for (const auto& [why, nodes] : excluded) r += " " + std::to_string(nodes) + " " + why + ";";
  add(kCpu, "without the CPU");
  add(kMemory, "without the memory");
  add(kModel, "without an allowed GPU model");
  if (count[kGpus] > 0) {
    r += " " + std::to_string(count[kGpus]) + " without " + std::to_string(task.num_gpu) +
         " free GPU(s)" +
         (task.gpu_milli < placement::kGpuMilli
              ? " with " + std::to_string(task.gpu_milli) + " milli"
              : "") +
         " (largest free: " + std::to_string(largest_free) + ");";
  }
  add(kSpread, "already running one of this model or deployment");
  if (r.back() == ';') r.pop_back();
  const auto most = std::max_element(count.begin(), count.end());
  return {r + ")", kLabels[static_cast<size_t>(most - count.begin())]};
}

}  // namespace dais::cluster
