// A vector memory shard the scheduler assigned to this node (cluster/collection_placement.h):
// loaded from Redis on a thread of its own (LOADING, with the points loaded so far), then held
// and followed (READY) until the assignment goes or changes (unloaded). The gateway sends a
// collection's searches only to READY replicas.
#pragma once

#include <functional>
#include <memory>

#include "cluster/assigned_job.h"
#include "memory/memory_service.h"

namespace dais::cmd {

// `memory` null (the node runs without --memory): FailedPrecondition naming the flags.
StatusOr<std::unique_ptr<cluster::AssignedJob>> StartMemoryShard(
    memory::MemoryService* memory, const cluster::Assignment& assignment,
    std::function<void()> changed);

}  // namespace dais::cmd
