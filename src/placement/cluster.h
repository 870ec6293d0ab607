// The scheduler's model of a cluster: nodes with CPU, memory and GPUs (each GPU divisible in
// thousandths, "milli", for GPU-sharing instances), and the instances placed on them. The same
// types serve the live scheduler and the simulator (`dais scheduler simulate`), so that a policy
// measured on a trace is the policy that places models.
//
// An instance is placed whole on one node: its GPUs are whole GPUs of that node, or a share of
// one GPU of it. Not thread-safe: one owner (the scheduler's loop, or the simulator).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace dais::placement {

inline constexpr int kGpuMilli = 1000;  // one whole GPU

struct NodeSpec {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;
  std::string gpu_model;  // "" when gpus == 0
};

// What one instance needs. A GPU-sharing instance has num_gpu 1 and gpu_milli < 1000; a
// whole-GPU instance gpu_milli 1000 per GPU; a CPU-only one num_gpu 0.
struct TaskSpec {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpu = 0;
  int gpu_milli = 0;                    // per GPU
  std::vector<std::string> gpu_models;  // allowed models; empty: any
  // Anti-affinity: at most this many instances of `group` on one node (-1: no limit).
  int max_per_node = -1;
  std::string group;  // the deployment (service) the instance belongs to

  // GPUs asked for, in thousandths of a GPU.
  int64_t GpuDemandMilli() const { return int64_t{num_gpu} * gpu_milli; }
};

// Where an instance goes: a node and, for each GPU it uses, the GPU's index on that node.
struct Placement {
  int node = -1;
  std::vector<int> gpus;  // size num_gpu; each gets gpu_milli
};

// A node's free resources.
struct NodeState {
  NodeSpec spec;
  int64_t cpu_free = 0;
  int64_t memory_free = 0;
  std::vector<int> gpu_free;                       // milli free per GPU
  std::unordered_map<std::string, int> per_group;  // instances per group on this node
  uint64_t version = 0;  // changes whenever the free resources change (for policies' caches)
  // Set by the live scheduler while it places one deployment: the node does not take it
  // (cordoned, labels that do not match, a recent failure of that deployment there).
  bool excluded = false;

  explicit NodeState(NodeSpec s);
  int64_t GpuFreeMilli() const;
  // GPUs with at least `milli` free.
  int GpusWithFree(int milli) const;
  // True when `task` fits here as a whole (CPU, memory, GPU model, GPUs, anti-affinity).
  bool Fits(const TaskSpec& task) const;
  bool ModelAllowed(const TaskSpec& task) const;
};

class Cluster {
 public:
  explicit Cluster(const std::vector<NodeSpec>& nodes);

  const std::vector<NodeState>& nodes() const { return nodes_; }
  const NodeState& node(int i) const { return nodes_[static_cast<size_t>(i)]; }
  int64_t gpu_capacity_milli() const { return gpu_capacity_milli_; }
  int64_t gpu_allocated_milli() const { return gpu_allocated_milli_; }

  // Takes the task's resources from the placement's node and GPUs. The placement must be valid
  // (CheckPlacement).
  void Apply(const TaskSpec& task, const Placement& p);
  // Gives them back.
  void Release(const TaskSpec& task, const Placement& p);
  // NodeState::excluded of node `i`.
  void SetExcluded(int i, bool excluded) { nodes_[static_cast<size_t>(i)].excluded = excluded; }
  // Empty when `p` is a valid placement of `task` now; otherwise why not.
  std::string CheckPlacement(const TaskSpec& task, const Placement& p) const;

 private:
  std::vector<NodeState> nodes_;
  int64_t gpu_capacity_milli_ = 0;
  int64_t gpu_allocated_milli_ = 0;
};

// The GPU indices a task would take on `node` when every candidate GPU is as good as another:
// whole GPUs: the first fully free ones; a share: the GPU with the least free that fits
// (best-fit). Empty when it does not fit.
std::vector<int> PackedGpus(const NodeState& node, const TaskSpec& task);

}  // namespace dais::placement
