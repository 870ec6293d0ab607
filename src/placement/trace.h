// Readers of the public cluster traces in ../shared/data (Alibaba clusterdata, see its README):
//   openb node lists   sn,cpu_milli,memory_mib,gpu,model
//   openb pod lists    name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,...
//   the 2025 DLRM serving trace
//                      instance_sn,role,app_name,cpu_request,...,gpu_request,...,memory_request,
//                      ...,max_instance_per_node,...
// Columns are found by the header's names (others are ignored). A malformed row is an
// InvalidArgument naming the file, the line and the column.
#pragma once

#include <string>
#include <vector>

#include "dais/status.h"
#include "placement/cluster.h"

namespace dais::placement {

StatusOr<std::vector<NodeSpec>> ReadNodeList(const std::string& path);
// An openb pod list or the DLRM trace (told apart by the header): CPU in milli-cores, memory in
// MiB, GPU demand per instance; DLRM instances are grouped by app_name with its
// max_instance_per_node as anti-affinity.
StatusOr<std::vector<TaskSpec>> ReadTaskList(const std::string& path);

// The same, from text (`name` stands for the file in errors).
StatusOr<std::vector<NodeSpec>> ParseNodeList(const std::string& text, const std::string& name);
StatusOr<std::vector<TaskSpec>> ParseTaskList(const std::string& text, const std::string& name);

}  // namespace dais::placement
