#include "placement/cluster.h"

#include <algorithm>

namespace dais::placement {

NodeState::NodeState(NodeSpec s)
    : spec(std::move(s)),
      cpu_free(spec.cpu_milli),
      memory_free(spec.memory_mib),
      gpu_free(static_cast<size_t>(spec.gpus), kGpuMilli) {}

int64_t NodeState::GpuFreeMilli() const {
  int64_t total = 0;
  for (int f : gpu_free) total += f;
  return total;
}

int NodeState::GpusWithFree(int milli) const {
  int n = 0;
  for (int f : gpu_free) n += f >= milli ? 1 : 0;
  return n;
}

bool NodeState::ModelAllowed(const TaskSpec& task) const {
  if (task.num_gpu == 0 || task.gpu_models.empty()) return true;
  return std::find(task.gpu_models.begin(), task.gpu_models.end(), spec.gpu_model) !=
         task.gpu_models.end();
}

bool NodeState::Fits(const TaskSpec& task) const {
  if (excluded) return false;
  if (task.cpu_milli > cpu_free || task.memory_mib > memory_free) return false;
  if (task.max_per_node >= 0) {
    auto it = per_group.find(task.group);
    if (it != per_group.end() && it->second >= task.max_per_node) return false;
  }
  if (task.num_gpu == 0) return true;
  return ModelAllowed(task) && GpusWithFree(task.gpu_milli) >= task.num_gpu;
}

Cluster::Cluster(const std::vector<NodeSpec>& nodes) {
  nodes_.reserve(nodes.size());
  for (const NodeSpec& n : nodes) {
    nodes_.emplace_back(n);
    gpu_capacity_milli_ += int64_t{n.gpus} * kGpuMilli;
  }
}

std::string Cluster::CheckPlacement(const TaskSpec& task, const Placement& p) const {
  if (p.node < 0 || p.node >= static_cast<int>(nodes_.size())) return "no such node";
  const NodeState& n = nodes_[static_cast<size_t>(p.node)];
  if (!n.Fits(task)) return "the task does not fit on " + n.spec.name;
  if (static_cast<int>(p.gpus.size()) != task.num_gpu) return "wrong number of GPUs";
  for (size_t i = 0; i < p.gpus.size(); ++i) {
    const int g = p.gpus[i];
    if (g < 0 || g >= n.spec.gpus) return "no such GPU";
    if (std::count(p.gpus.begin(), p.gpus.end(), g) > 1) return "a GPU given twice";
    if (n.gpu_free[static_cast<size_t>(g)] < task.gpu_milli) return "GPU without room";
  }
  return "";
}

void Cluster::Apply(const TaskSpec& task, const Placement& p) {
  NodeState& n = nodes_[static_cast<size_t>(p.node)];
  n.cpu_free -= task.cpu_milli;
  n.memory_free -= task.memory_mib;
  for (int g : p.gpus) n.gpu_free[static_cast<size_t>(g)] -= task.gpu_milli;
  if (task.max_per_node >= 0 || !task.group.empty()) ++n.per_group[task.group];
  ++n.version;
  gpu_allocated_milli_ += task.GpuDemandMilli();
}

void Cluster::Release(const TaskSpec& task, const Placement& p) {
  NodeState& n = nodes_[static_cast<size_t>(p.node)];
  n.cpu_free += task.cpu_milli;
  n.memory_free += task.memory_mib;
  for (int g : p.gpus) n.gpu_free[static_cast<size_t>(g)] += task.gpu_milli;
  if (task.max_per_node >= 0 || !task.group.empty()) {
    if (--n.per_group[task.group] <= 0) n.per_group.erase(task.group);
  }
  ++n.version;
  gpu_allocated_milli_ -= task.GpuDemandMilli();
}

std::vector<int> PackedGpus(const NodeState& node, const TaskSpec& task) {
  std::vector<int> out;
  if (task.num_gpu == 0) return out;
  if (task.gpu_milli >= kGpuMilli || task.num_gpu > 1) {
    for (int g = 0; g < node.spec.gpus && static_cast<int>(out.size()) < task.num_gpu; ++g) {
      if (node.gpu_free[static_cast<size_t>(g)] >= task.gpu_milli) out.push_back(g);
    }
    if (static_cast<int>(out.size()) < task.num_gpu) out.clear();
    return out;
  }
  int best = -1;
  for (int g = 0; g < node.spec.gpus; ++g) {
    const int f = node.gpu_free[static_cast<size_t>(g)];
    if (f >= task.gpu_milli && (best < 0 || f < node.gpu_free[static_cast<size_t>(best)])) best = g;
  }
  if (best >= 0) out.push_back(best);
  return out;
}

}  // namespace dais::placement
