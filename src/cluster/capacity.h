// What a node offers the scheduler: CPU, memory, GPUs (model and memory of each) and labels, as
// registered in etcd. GPUs come from NVML when a GPU is present; without one they can be
// declared for simulation and tests (`--gpus 2xA100:80GiB`).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dais/status.h"

namespace dais::cluster {

struct Gpu {
  std::string model;
  int64_t memory_mib = 0;
};

struct NodeCapacity {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::vector<Gpu> gpus;
  std::map<std::string, std::string> labels;
};

// "2xA100:80GiB" or "A100:80GiB,T4:16GiB" (memory in GiB or MiB; a count prefix "Nx"). Empty:
// no GPUs. InvalidArgument naming the part that is wrong.
StatusOr<std::vector<Gpu>> ParseGpus(const std::string& spec);
// "zone=a,tier=gpu". InvalidArgument for a part without '=' or with an empty key.
StatusOr<std::map<std::string, std::string>> ParseLabels(const std::string& spec);
// This machine's cores (in milli) and memory.
NodeCapacity LocalCapacity();

}  // namespace dais::cluster
