// A vector memory collection as the control plane places it (docs/memory.md, "In a cluster"):
// written by `dais ctl apply -f` ('kind: collection', validated there with memory's parser) to
// /dais/collections/<name> as
//   {"spec": {<the collection spec: name, tenant, dimension, metric, shards, replicas, ...>},
//    "resources": {"cpu_milli": 500, "memory_mib": 1024}, "node_labels": {"pool": "memory"}}
// Each shard is a deployment "memory:<collection>:<shard>" of `replicas` instances, at most one
// per node (replicas never share a node), that count `resources` against the node's capacity.
// Its assignments carry {"spec": ..., "shard": N} as the object `memory`; the node loads that
// shard from Redis and follows its log (memory::MemoryService::Host). The gateway reads the
// spec (tenant, shards, metric) to fan searches out and merge them.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "cluster/deployment.h"
#include "dais/status.h"

namespace dais::cluster {

inline constexpr const char* kCollectionsPrefix = "/dais/collections/";
inline constexpr const char* kMemoryTaskPrefix = "memory:";

struct CollectionPlacement {
  std::string name;
  std::string tenant;  // empty: every tenant's
  std::string metric;  // cosine, l2 or inner_product (l2: lower is better)
  int shards = 1;
  int replicas = 1;
  int64_t cpu_milli = 500;
  int64_t memory_mib = 1024;
  std::map<std::string, std::string> node_labels;
  std::string spec_json;  // the collection spec, as memory::ParseCollectionSpec reads it

  // "memory:<name>:<shard>": the deployment, instance and assignment key of a shard.
  std::string ShardTask(int shard) const;
  DeploymentSpec ShardDeployment(int shard) const;
  // The assignment's `memory` object of a shard.
  std::string ShardJob(int shard) const;
  bool HigherIsBetter() const { return metric != "l2"; }
};

// The stored document (above); InvalidArgument naming what is missing.
StatusOr<CollectionPlacement> ParseCollectionPlacement(const std::string& json);
std::string CollectionPlacementToJson(const CollectionPlacement& c);

// The shard of an assignment's `memory` object, and its spec (JSON).
struct ShardJobSpec {
  std::string spec_json;
  int shard = 0;
};
StatusOr<ShardJobSpec> ParseShardJob(const std::string& json);

}  // namespace dais::cluster
