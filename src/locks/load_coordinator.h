// The fleet-wide coordination of model loads (runtime/load_coordinator.h's seam) on the lock
// service (lock_service.h). Two policies:
//   hierarchy: a load of version V of model M on node N holds the NODE(M, N) lock — one load
//              of a model at a time on a node — which carries an intention on M, so an
//              operator's MODEL(M) lock (a rollout or rollback of the whole family) excludes it.
//              Different nodes and different models load in parallel.
//   global:    every load in the fleet holds MODEL("__global__"): one load at a time anywhere
//              (the design notes' starting point; the benchmark's baseline).
// The permit's fencing token is the lease's; the model manager applies a version switch only
// with a token at least as new as the last one it applied and only while the lease holds.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "locks/lock_service.h"
#include "runtime/load_coordinator.h"

namespace dais::locks {

enum class CoordinationPolicy { kHierarchy, kGlobal };

class LockLoadCoordinator : public runtime::LoadCoordinator {
 public:
  // Borrows `locks`, which must outlive the coordinator.
  LockLoadCoordinator(locks::LockService* locks, CoordinationPolicy policy, std::string node_id,
                      std::chrono::milliseconds wait_timeout)
      : locks_(locks), policy_(policy), node_(std::move(node_id)), wait_(wait_timeout) {}

  // Waits for the lock up to `wait_timeout`, in slices of a second so that Cancel() (server
  // shutdown) ends the wait promptly.
  StatusOr<std::unique_ptr<runtime::LoadPermit>> BeginLoad(const std::string& model,
                                                           int64_t version) override;
  void Cancel() { cancelled_ = true; }

 private:
  std::atomic<bool> cancelled_{false};
  locks::LockService* locks_;
  const CoordinationPolicy policy_;
  const std::string node_;
  const std::chrono::milliseconds wait_;
};

}  // namespace dais::locks
