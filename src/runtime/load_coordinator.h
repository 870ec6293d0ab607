// Seam between the model manager and a fleet-wide coordinator (locks::LockLoadCoordinator: the
// lock hierarchy on Redis). Before a version is loaded the manager asks for a permit; the
// permit's fencing token guards the switch of unversioned traffic to the new version: the
// manager remembers the highest token it applied per model and refuses a lower one, and refuses
// a permit whose lease was lost. Without a coordinator (standalone) loads need no permit.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "dais/status.h"

namespace dais::runtime {

class LoadPermit {
 public:
  virtual ~LoadPermit() = default;  // releases the locks
  // Fencing token of the grant (only grows per model).
  virtual int64_t token() const = 0;
  // OK while the lease is held; an error once it is lost (renewal failed, deadline passed).
  virtual Status Check() const = 0;
};

class LoadCoordinator {
 public:
  virtual ~LoadCoordinator() = default;
  // Blocks until the permit for loading `version` of `model` on this node is granted, or fails
  // (Unavailable: Redis unreachable; DeadlineExceeded: held by others too long). The manager
  // then skips the load and retries at the next poll.
  virtual StatusOr<std::unique_ptr<LoadPermit>> BeginLoad(const std::string& model,
                                                          int64_t version) = 0;
};

}  // namespace dais::runtime
