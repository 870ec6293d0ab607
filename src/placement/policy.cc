#include "placement/policy.h"

#include <algorithm>
#include <array>
#include <limits>

namespace dais::placement {
namespace {

constexpr size_t kMaxGpus = 16;

class FirstFit final : public Policy {
 public:
  std::string_view name() const override { return "first-fit"; }
  std::optional<Placement> Place(const Cluster& cluster, const TaskSpec& task) override {
    for (size_t i = 0; i < cluster.nodes().size(); ++i) {
      const NodeState& n = cluster.nodes()[i];
      if (!n.Fits(task)) continue;
      return Placement{static_cast<int>(i), PackedGpus(n, task)};
    }
    return std::nullopt;
  }
};

// Share of a node left free after placing `task` there (CPU and GPU, equally weighted).
double LeftAfter(const NodeState& n, const TaskSpec& task) {
  double left = n.spec.cpu_milli > 0 ? static_cast<double>(n.cpu_free - task.cpu_milli) /
                                           static_cast<double>(n.spec.cpu_milli)
                                     : 0;
  if (n.spec.gpus > 0) {
    left += static_cast<double>(n.GpuFreeMilli() - task.GpuDemandMilli()) /
            static_cast<double>(int64_t{n.spec.gpus} * kGpuMilli);
  }
  return left;
}

class BestFit final : public Policy {
 public:
  std::string_view name() const override { return "best-fit"; }
  std::optional<Placement> Place(const Cluster& cluster, const TaskSpec& task) override {
    int best = -1;
    double best_left = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < cluster.nodes().size(); ++i) {
      const NodeState& n = cluster.nodes()[i];
      if (!n.Fits(task)) continue;
      const double left = LeftAfter(n, task);
      if (left < best_left) {
        best_left = left;
        best = static_cast<int>(i);
      }
    }
    if (best < 0) return std::nullopt;
    return Placement{best, PackedGpus(cluster.node(best), task)};
  }
};

// FGD, and dais's policy on top of it (`tie_break`).
class Fragmentation final : public Policy {
 public:
  Fragmentation(Workload workload, bool tie_break)
      : workload_(std::move(workload)), tie_break_(tie_break) {}
  std::string_view name() const override { return tie_break_ ? "dais" : "fgd"; }

  std::optional<Placement> Place(const Cluster& cluster, const TaskSpec& task) override {
    if (cache_.size() != cluster.nodes().size()) cache_.assign(cluster.nodes().size(), {});
    std::optional<Placement> best;
    double best_delta = std::numeric_limits<double>::infinity();
    double best_tie = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < cluster.nodes().size(); ++i) {
      const NodeState& n = cluster.nodes()[i];
      if (!n.Fits(task)) continue;
      const double before = Current(i, n);
      std::vector<int> gpus;
      const double after = BestAfter(n, task, &gpus);
      const double delta = after - before;
      const double tie = tie_break_ ? TieScore(n, task) : 0;
      // Equal within a rounding error: weights are fractions.
      constexpr double kEps = 1e-9;
      if (delta < best_delta - kEps || (delta <= best_delta + kEps && tie < best_tie)) {
        best_delta = delta;
        best_tie = tie;
        best = Placement{static_cast<int>(i), std::move(gpus)};
      }
    }
    return best;
  }

 private:
  double Current(size_t i, const NodeState& n) {
    auto& [version, frag, valid] = cache_[i];
    if (!valid || version != n.version) {
      frag = NodeFragmentation(n, workload_);
      version = n.version;
      valid = true;
    }
    return frag;
  }

  // The node's fragmentation once `task` is on it, on the GPU(s) that leave the least; the
  // chosen GPUs in `gpus`.
  double BestAfter(const NodeState& n, const TaskSpec& task, std::vector<int>* gpus) const {
    const int64_t cpu = n.cpu_free - task.cpu_milli;
    const int64_t mem = n.memory_free - task.memory_mib;
    std::array<int, kMaxGpus> free{};
    const size_t g = std::min(n.gpu_free.size(), kMaxGpus);
    std::copy_n(n.gpu_free.begin(), g, free.begin());
    const std::span<const int> view(free.data(), g);
    if (task.num_gpu == 0) return NodeFragmentation(n, view, cpu, mem, workload_);
    if (task.num_gpu > 1 || task.gpu_milli >= kGpuMilli) {
      *gpus = PackedGpus(n, task);  // whole GPUs: any fully free ones are alike
      for (int i : *gpus) free[static_cast<size_t>(i)] -= task.gpu_milli;
      return NodeFragmentation(n, view, cpu, mem, workload_);
    }
    double best = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < g; ++i) {
      if (free[i] < task.gpu_milli) continue;
      free[i] -= task.gpu_milli;
      const double f = NodeFragmentation(n, view, cpu, mem, workload_);
      free[i] += task.gpu_milli;
      if (f < best) {
        best = f;
        *gpus = {static_cast<int>(i)};
      }
    }
    return best;
  }

  // Lower is better among placements of equal fragmentation growth. GPU instances keep FGD's
  // order (packing them on ties was measured worse: 464 unallocated GPUs against FGD's 420 on
  // the default openb trace). A CPU-only instance goes to a node without GPUs, else to one whose
  // GPUs are all taken, so that the CPUs beside free GPUs stay for GPU instances.
  static double TieScore(const NodeState& n, const TaskSpec& task) {
    if (task.num_gpu > 0) return 0;
    if (n.spec.gpus == 0) return -1;
    return static_cast<double>(n.GpuFreeMilli()) /
           static_cast<double>(int64_t{n.spec.gpus} * kGpuMilli);
  }

  struct Entry {
    uint64_t version = 0;
    double frag = 0;
    bool valid = false;
  };
  const Workload workload_;
  const bool tie_break_;
  std::vector<Entry> cache_;
};

}  // namespace

const std::vector<std::string>& PolicyNames() {
  static const std::vector<std::string> kNames = {"first-fit", "best-fit", "fgd", "dais"};
  return kNames;
}

StatusOr<std::unique_ptr<Policy>> MakePolicy(std::string_view name, Workload workload) {
  if (name == "first-fit") return std::unique_ptr<Policy>(new FirstFit());
  if (name == "best-fit") return std::unique_ptr<Policy>(new BestFit());
  if (name == "fgd") return std::unique_ptr<Policy>(new Fragmentation(std::move(workload), false));
  if (name == "dais") return std::unique_ptr<Policy>(new Fragmentation(std::move(workload), true));
  return InvalidArgument("unknown placement policy '" + std::string(name) +
                         "' (first-fit, best-fit, fgd, dais)");
}

}  // namespace dais::placement
