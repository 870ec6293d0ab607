#include "placement/fragmentation.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace dais::placement {

Workload Workload::FromTasks(const std::vector<TaskSpec>& tasks, double coverage,
                             size_t max_classes) {
  using Key = std::tuple<int64_t, int, int, std::vector<std::string>>;
  struct Count {
    size_t n = 0;
    const TaskSpec* first = nullptr;
    double memory_mib = 0;  // sum
  };
  std::map<Key, Count> counts;
  for (const TaskSpec& t : tasks) {
    Count& c = counts[Key{t.cpu_milli, t.num_gpu, t.gpu_milli, t.gpu_models}];
    if (c.n++ == 0) c.first = &t;
    c.memory_mib += static_cast<double>(t.memory_mib);
  }
  std::vector<Count> by_count;
  for (const auto& [key, c] : counts) by_count.push_back(c);
  std::stable_sort(by_count.begin(), by_count.end(),
                   [](const Count& a, const Count& b) { return a.n > b.n; });
  Workload w;
  size_t covered = 0;
  for (const auto& [count, task, memory] : by_count) {
    if (w.classes.size() >= max_classes ||
        (covered >= coverage * static_cast<double>(tasks.size()) && !w.classes.empty())) {
      break;
    }
    Class c;
    c.shape = *task;
    c.memory_mib = static_cast<int64_t>(memory / static_cast<double>(count));
    c.shape.name.clear();
    c.shape.group.clear();
    c.shape.max_per_node = -1;
    c.shape.memory_mib = 0;  // the paper's classes are CPU and GPU demand
    c.weight = static_cast<double>(count);
    covered += count;
    w.classes.push_back(std::move(c));
  }
  for (Class& c : w.classes) c.weight /= static_cast<double>(std::max<size_t>(covered, 1));
  return w;
}

double NodeFragmentation(const NodeState& node, std::span<const int> gpu_free, int64_t cpu_free,
                         int64_t memory_free, const Workload& workload) {
  if (gpu_free.empty()) return 0;
  int64_t free_total = 0;
  for (int f : gpu_free) free_total += f;
  if (free_total == 0) return 0;
  double frag = 0;
  for (const Workload::Class& c : workload.classes) {
    const TaskSpec& t = c.shape;
    bool fits = t.num_gpu > 0 && t.cpu_milli <= cpu_free && t.memory_mib <= memory_free &&
                node.ModelAllowed(t);
    int64_t unusable = 0;
    if (fits) {
      int usable_gpus = 0;
      for (int f : gpu_free) {
        if (f >= t.gpu_milli) {
          ++usable_gpus;
        } else {
          unusable += f;
        }
      }
      fits = usable_gpus >= t.num_gpu;
    }
    frag += c.weight * static_cast<double>(fits ? unusable : free_total);
  }
  return frag;
}

double NodeFragmentation(const NodeState& node, const Workload& workload) {
  return NodeFragmentation(node, node.gpu_free, node.cpu_free, node.memory_free, workload);
}

double ClusterFragmentation(const Cluster& cluster, const Workload& workload) {
  double total = 0;
  for (const NodeState& n : cluster.nodes()) total += NodeFragmentation(n, workload);
  return total;
}

}  // namespace dais::placement
