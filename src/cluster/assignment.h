// What the scheduler asks a node to run: /dais/assignments/<node>/<model>, as JSON
//   {"deployment": "ranker", "model": "mlp_small", "version": 2, "gpus": [0], "gpu_milli": 500,
//    "priority": "latency-sensitive"}
// `version` -1 is the repository's version policy; `gpus` the GPU indices the placement chose on
// the node (empty for a CPU instance), with `gpu_milli` the share of each (1000: whole GPUs).
// Written by the scheduler, read by the node (which loads that version and reports the GPUs in
// its instance state) and by the scheduler itself (what each node already holds).
// A training job's assignment (key .../training:<job>) also carries the job's spec as the object
// `training` (training_job.h): the node runs the job instead of loading a model. A vector
// memory shard's (key .../memory:<collection>:<shard>) carries `memory` (collection_placement.h):
// the node holds that shard. An agent's (key .../agent:<name>) carries `agent`: the node runs its
// runtime (agent_placement.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dais/status.h"

namespace dais::cluster {

struct Assignment {
  std::string deployment;
  std::string model;
  int64_t version = -1;
  std::vector<int> gpus;
  int gpu_milli = 0;
  std::string priority = "latency-sensitive";
  std::string training;  // the training job's spec (JSON object); empty for a model
  std::string memory;    // the shard's spec (JSON object); empty for a model
  std::string agent;     // the agent's spec (JSON object; agent_placement.h); empty for a model

  // A job (assigned_job.h) rather than a model, and its spec (compared to see it changed).
  bool IsJob() const { return !training.empty() || !memory.empty() || !agent.empty(); }
  std::string JobSpec() const { return training + memory + agent; }

  std::string ToJson() const;
};

// InvalidArgument naming the field that is missing or of the wrong type.
StatusOr<Assignment> AssignmentFromJson(const std::string& json);

}  // namespace dais::cluster
