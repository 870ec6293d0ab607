// This machine's GPUs through NVML, the NVIDIA driver's management library. libnvidia-ml.so.1 is
// opened at run time (dlopen): dais builds and runs on machines without the driver, where
// DiscoverGpus answers NotFound and `dais node` registers no GPU unless --gpus declares some.
#pragma once

#include <string>
#include <vector>

#include "cluster/capacity.h"
#include "dais/status.h"

namespace dais::cluster {

// Each GPU's model (ShortGpuModel of its NVML name) and total memory. NotFound without the
// library; Unavailable naming the NVML call and its error when the driver answers with one.
StatusOr<std::vector<Gpu>> DiscoverGpus();

// The model as deployments name it in constraints.gpu_models: "NVIDIA A100-SXM4-80GB" -> "A100",
// "NVIDIA H200" -> "H200", "Tesla V100-SXM2-16GB" -> "V100", "NVIDIA GeForce RTX 4090" ->
// "RTX4090", "NVIDIA L4" -> "L4".
std::string ShortGpuModel(const std::string& nvml_name);

}  // namespace dais::cluster
