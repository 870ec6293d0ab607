// A deployment: a model to run as N instances somewhere in the cluster, with what each instance
// needs and where it may go. Written by `dais ctl apply -f spec.yaml` to /dais/deployments/<name>
// (as JSON), read by the scheduler. docs/cluster.md documents every field.
//
//   name: ranker                 # [a-z0-9_.-]+, unique
//   model: mlp_small             # a model of the nodes' repository
//   version: 1                   # optional: pin a version (default: the repository's latest)
//   replicas: 2
//   resources: {cpu_milli: 1000, memory_mib: 512, gpus: 1}   # or gpu_milli: 500 (a share)
//   constraints: {gpu_models: [A100], node_labels: {zone: a}, max_per_node: 1}
//   priority: latency-sensitive  # or best-effort
//   may_preempt: false           # may remove best-effort instances to place its own
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dais/status.h"
#include "placement/cluster.h"

namespace dais::cluster {

struct DeploymentSpec {
  std::string name;
  std::string model;
  int64_t version = -1;  // -1: latest
  int replicas = 1;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;       // whole GPUs
  int gpu_milli = 0;  // a share of one GPU (0 < gpu_milli < 1000), exclusive with gpus
  int64_t gpu_memory_mib = 0;
  std::vector<std::string> gpu_models;
  std::map<std::string, std::string> node_labels;
  int max_per_node = 1;  // spreads replicas across nodes by default
  std::string priority = "latency-sensitive";
  // A latency-sensitive deployment that finds no room may remove best-effort instances.
  bool may_preempt = false;

  // One instance as the placement code sees it.
  placement::TaskSpec Task() const;
};

// Parses and validates a YAML spec: unknown fields, wrong types and impossible values are
// InvalidArgument naming the field ("resources.gpu_milli: 1500 is more than one GPU").
StatusOr<DeploymentSpec> ParseDeploymentYaml(const std::string& yaml);
std::string DeploymentToJson(const DeploymentSpec& d);
StatusOr<DeploymentSpec> DeploymentFromJson(const std::string& json);

}  // namespace dais::cluster
