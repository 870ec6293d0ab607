// Wiring of the fleet coordination into `dais serve`: a Redis client for the lock service, the
// lock service, and the load coordinator given to the model manager (src/locks/load_coordinator.h).
#pragma once

#include <memory>
#include <string>

#include "dais/status.h"
#include "runtime/model_manager.h"

namespace dais::cmd {

struct ServeOptions;

class CoordinationRuntime {
 public:
  // Null (no coordination) for --coordination none, or auto without --redis / poll mode.
  static StatusOr<std::unique_ptr<CoordinationRuntime>> Create(const ServeOptions& options,
                                                               const std::string& node_id,
                                                               runtime::ModelManager* manager);
  ~CoordinationRuntime();
  // Ends waits for locks (shutdown).
  void Cancel();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dais::cmd
